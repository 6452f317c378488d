// etcd's messages between the JSON of its gateway (proto3's JSON mapping, as
// bench/etcd_sim.cc's steps write and read them: bytes in base64, int64s as
// strings, enums by name, field names as in the .proto) and protobuf's wire
// format, which etcd's gRPC API takes. Driven by a table of the messages the
// generator uses, with etcd's field numbers (api/etcdserverpb/rpc.proto,
// api/mvccpb/kv.proto). A field present in the JSON is written, even at its
// default (so a oneof's 0, Compare's create_revision, keeps its presence);
// one absent from the answer is left out of the JSON, as the gateway does.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace etcd_sim {

// ---- base64 (proto3's JSON bytes) ------------------------------------------

inline std::string b64(const std::string& in) {
  static const char* const t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

inline std::string unb64(const std::string& in) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char ch : in) {
    int d = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
          : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
    if (d < 0) continue;
    v = (v << 6) | static_cast<uint32_t>(d);
    if ((bits += 6) >= 8) out.push_back(static_cast<char>((v >> (bits -= 8)) & 0xff));
  }
  return out;
}


namespace proto {

using json = nlohmann::json;

enum class Type { bytes, string, int64, uint64, boolean, enumeration, message };

struct Field {
  const char* name;
  int number;
  Type type;
  const char* message = nullptr;            // Type::message: its name
  std::vector<const char*> enum_names = {};  // Type::enumeration: by value
  bool repeated = false;
};

inline const std::map<std::string, std::vector<Field>>& schema() {
  using T = Type;
  static const std::map<std::string, std::vector<Field>> s = {
      {"ResponseHeader",
       {{"cluster_id", 1, T::uint64}, {"member_id", 2, T::uint64}, {"revision", 3, T::int64}, {"raft_term", 4, T::uint64}}},
      {"KeyValue",
       {{"key", 1, T::bytes}, {"create_revision", 2, T::int64}, {"mod_revision", 3, T::int64}, {"version", 4, T::int64},
        {"value", 5, T::bytes}, {"lease", 6, T::int64}}},
      {"RangeRequest",
       {{"key", 1, T::bytes}, {"range_end", 2, T::bytes}, {"limit", 3, T::int64}, {"revision", 4, T::int64},
        {"serializable", 7, T::boolean}, {"keys_only", 8, T::boolean}, {"count_only", 9, T::boolean}}},
      {"RangeResponse",
       {{"header", 1, T::message, "ResponseHeader"}, {"kvs", 2, T::message, "KeyValue", {}, true},
        {"more", 3, T::boolean}, {"count", 4, T::int64}}},
      {"PutRequest", {{"key", 1, T::bytes}, {"value", 2, T::bytes}, {"lease", 3, T::int64}}},
      {"PutResponse", {{"header", 1, T::message, "ResponseHeader"}}},
      {"DeleteRangeRequest", {{"key", 1, T::bytes}, {"range_end", 2, T::bytes}}},
      {"DeleteRangeResponse", {{"header", 1, T::message, "ResponseHeader"}, {"deleted", 2, T::int64}}},
      {"Compare",
       {{"result", 1, T::enumeration, nullptr, {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"}},
        {"target", 2, T::enumeration, nullptr, {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"}},
        {"key", 3, T::bytes}, {"version", 4, T::int64}, {"create_revision", 5, T::int64},
        {"mod_revision", 6, T::int64}, {"value", 7, T::bytes}, {"lease", 8, T::int64}, {"range_end", 64, T::bytes}}},
      {"RequestOp",
       {{"request_range", 1, T::message, "RangeRequest"}, {"request_put", 2, T::message, "PutRequest"},
        {"request_delete_range", 3, T::message, "DeleteRangeRequest"}, {"request_txn", 4, T::message, "TxnRequest"}}},
      {"ResponseOp",
       {{"response_range", 1, T::message, "RangeResponse"}, {"response_put", 2, T::message, "PutResponse"},
        {"response_delete_range", 3, T::message, "DeleteRangeResponse"},
        {"response_txn", 4, T::message, "TxnResponse"}}},
      {"TxnRequest",
       {{"compare", 1, T::message, "Compare", {}, true}, {"success", 2, T::message, "RequestOp", {}, true},
        {"failure", 3, T::message, "RequestOp", {}, true}}},
      {"TxnResponse",
       {{"header", 1, T::message, "ResponseHeader"}, {"succeeded", 2, T::boolean},
        {"responses", 3, T::message, "ResponseOp", {}, true}}},
      {"LeaseGrantRequest", {{"TTL", 1, T::int64}, {"ID", 2, T::int64}}},
      {"LeaseGrantResponse",
       {{"header", 1, T::message, "ResponseHeader"}, {"ID", 2, T::int64}, {"TTL", 3, T::int64}, {"error", 4, T::string}}},
      {"LeaseIdRequest", {{"ID", 1, T::int64}}},
      {"LeaseKeepAliveResponse", {{"header", 1, T::message, "ResponseHeader"}, {"ID", 2, T::int64}, {"TTL", 3, T::int64}}},
      {"LeaseRevokeResponse", {{"header", 1, T::message, "ResponseHeader"}}},
      {"WatchCreateRequest",
       {{"key", 1, T::bytes}, {"range_end", 2, T::bytes}, {"start_revision", 3, T::int64},
        {"progress_notify", 4, T::boolean}, {"prev_kv", 6, T::boolean}}},
      {"WatchRequest", {{"create_request", 1, T::message, "WatchCreateRequest"}}},
      {"Event",
       {{"type", 1, T::enumeration, nullptr, {"PUT", "DELETE"}}, {"kv", 2, T::message, "KeyValue"},
        {"prev_kv", 3, T::message, "KeyValue"}}},
      {"WatchResponse",
       {{"header", 1, T::message, "ResponseHeader"}, {"watch_id", 2, T::int64}, {"created", 3, T::boolean},
        {"canceled", 4, T::boolean}, {"compact_revision", 5, T::int64}, {"cancel_reason", 6, T::string},
        {"fragment", 7, T::boolean}, {"events", 11, T::message, "Event", {}, true}}},
  };
  return s;
}

struct Call {
  const char* path;
  const char* method;
  const char* request;
  const char* response;
};

inline const Call& call_of(std::string_view path) {
  static const Call calls[] = {
      {"/v3/kv/range", "/etcdserverpb.KV/Range", "RangeRequest", "RangeResponse"},
      {"/v3/kv/put", "/etcdserverpb.KV/Put", "PutRequest", "PutResponse"},
      {"/v3/kv/deleterange", "/etcdserverpb.KV/DeleteRange", "DeleteRangeRequest", "DeleteRangeResponse"},
      {"/v3/kv/txn", "/etcdserverpb.KV/Txn", "TxnRequest", "TxnResponse"},
      {"/v3/lease/grant", "/etcdserverpb.Lease/LeaseGrant", "LeaseGrantRequest", "LeaseGrantResponse"},
      {"/v3/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive", "LeaseIdRequest", "LeaseKeepAliveResponse"},
      {"/v3/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke", "LeaseIdRequest", "LeaseRevokeResponse"},
      {"/v3/watch", "/etcdserverpb.Watch/Watch", "WatchRequest", "WatchResponse"},
  };
  for (const Call& c : calls)
    if (path == c.path) return c;
  throw std::runtime_error("etcd_sim: no gRPC method for " + std::string(path));
}

inline const char* method(const char* path) { return call_of(path).method; }

// ---- writing ----------------------------------------------------------------

inline void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

inline int64_t number(const json& v) { return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>(); }

inline std::string encode(const std::string& message, const json& j);

inline void encode_one(std::string& out, const Field& f, const json& v) {
  const auto tag = [&](int wire) { varint(out, static_cast<uint64_t>(f.number) << 3 | static_cast<uint64_t>(wire)); };
  const auto delimited = [&](const std::string& bytes) {
    tag(2);
    varint(out, bytes.size());
    out += bytes;
  };
  switch (f.type) {
    case Type::bytes: return delimited(unb64(v.get<std::string>()));
    case Type::string: return delimited(v.get<std::string>());
    case Type::message: return delimited(encode(f.message, v));
    case Type::boolean: tag(0), varint(out, v.get<bool>() ? 1 : 0); return;
    case Type::int64: tag(0), varint(out, static_cast<uint64_t>(number(v))); return;
    case Type::uint64: tag(0), varint(out, std::stoull(v.is_string() ? v.get<std::string>() : v.dump())); return;
    case Type::enumeration: {
      uint64_t value = 0;
      while (value < f.enum_names.size() && v.get<std::string>() != f.enum_names[value]) ++value;
      if (value == f.enum_names.size()) throw std::runtime_error("etcd_sim: no " + v.dump() + " in " + f.name);
      tag(0), varint(out, value);
      return;
    }
  }
}

inline std::string encode(const std::string& message, const json& j) {
  std::string out;
  for (const Field& f : schema().at(message)) {
    auto it = j.find(f.name);
    if (it == j.end()) continue;
    if (f.repeated) {
      for (const json& each : *it) encode_one(out, f, each);
    } else {
      encode_one(out, f, *it);
    }
  }
  return out;
}

// The request of the call at `path`, from its gateway JSON.
inline std::string request(const char* path, const json& body) { return encode(call_of(path).request, body); }

// ---- reading ------------------------------------------------------------------

struct Reader {
  std::string_view in;
  size_t at = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= in.size()) throw std::runtime_error("etcd_sim: a truncated protobuf varint");
      const uint8_t b = static_cast<uint8_t>(in[at++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("etcd_sim: a protobuf varint over 64 bits");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > in.size() - at) throw std::runtime_error("etcd_sim: a protobuf field past the message's end");
    auto out = in.substr(at, n);
    at += n;
    return out;
  }
  void skip(int wire) {
    if (wire == 0) varint();
    else if (wire == 2) bytes();
    else if (wire == 1) at += 8;
    else if (wire == 5) at += 4;
    else throw std::runtime_error("etcd_sim: protobuf wire type " + std::to_string(wire));
  }
};

inline json decode(const std::string& message, std::string_view in) {
  json out = json::object();
  const auto& fields = schema().at(message);
  for (Reader r{in}; r.at < in.size();) {
    const uint64_t key = r.varint();
    const int number = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    const Field* f = nullptr;
    for (const Field& each : fields)
      if (each.number == number) f = &each;
    if (!f) {
      r.skip(wire);
      continue;
    }
    json v;
    switch (f->type) {
      case Type::bytes: v = b64(std::string(r.bytes())); break;
      case Type::string: v = std::string(r.bytes()); break;
      case Type::message: v = decode(f->message, r.bytes()); break;
      case Type::boolean: v = r.varint() != 0; break;
      case Type::int64: v = std::to_string(static_cast<int64_t>(r.varint())); break;
      case Type::uint64: v = std::to_string(r.varint()); break;
      case Type::enumeration: {
        const uint64_t e = r.varint();
        v = e < f->enum_names.size() ? json(f->enum_names[e]) : json(e);
        break;
      }
    }
    if (f->repeated) out[f->name].push_back(std::move(v));
    else out[f->name] = std::move(v);
  }
  return out;
}

// The answer of the call at `path`, as its gateway JSON.
inline json response_json(const char* path, std::string_view bytes) { return decode(call_of(path).response, bytes); }

}  // namespace proto
}  // namespace etcd_sim
