#include "etcd/gateway_json.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "etcd/base64.h"
#include "etcd/protobuf.h"

namespace etcd_gateway {
namespace {

using json = nlohmann::json;
namespace pb = cxxrun::etcd::protobuf;

enum class Kind { int64, uint64, boolean, bytes, string, enumeration, message };

struct FieldSpec {
  uint32_t number;
  const char* name;
  Kind kind;
  const char* type = "";  // the message or enum, for those kinds
  bool repeated = false;
  bool oneof = false;  // present by being set: written and shown even at its default
};

constexpr bool kRepeated = true;
constexpr bool kOneof = true;

// etcd's messages (api/etcdserverpb/rpc.proto, api/mvccpb/kv.proto), the
// fields of each in number order; those the client never meets are left out.
const std::map<std::string, std::vector<FieldSpec>>& messages() {
  static const std::map<std::string, std::vector<FieldSpec>> table = {
      {"ResponseHeader",
       {{1, "cluster_id", Kind::uint64}, {2, "member_id", Kind::uint64}, {3, "revision", Kind::int64},
        {4, "raft_term", Kind::uint64}}},
      {"KeyValue",
       {{1, "key", Kind::bytes}, {2, "create_revision", Kind::int64}, {3, "mod_revision", Kind::int64},
        {4, "version", Kind::int64}, {5, "value", Kind::bytes}, {6, "lease", Kind::int64}}},
      {"Event",
       {{1, "type", Kind::enumeration, "EventType"}, {2, "kv", Kind::message, "KeyValue"},
        {3, "prev_kv", Kind::message, "KeyValue"}}},
      {"RangeRequest",
       {{1, "key", Kind::bytes}, {2, "range_end", Kind::bytes}, {3, "limit", Kind::int64},
        {4, "revision", Kind::int64}, {5, "sort_order", Kind::enumeration, "SortOrder"},
        {6, "sort_target", Kind::enumeration, "SortTarget"}, {7, "serializable", Kind::boolean},
        {8, "keys_only", Kind::boolean}, {9, "count_only", Kind::boolean}, {10, "min_mod_revision", Kind::int64},
        {11, "max_mod_revision", Kind::int64}, {12, "min_create_revision", Kind::int64},
        {13, "max_create_revision", Kind::int64}}},
      {"RangeResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "kvs", Kind::message, "KeyValue", kRepeated},
        {3, "more", Kind::boolean}, {4, "count", Kind::int64}}},
      {"PutRequest",
       {{1, "key", Kind::bytes}, {2, "value", Kind::bytes}, {3, "lease", Kind::int64}, {4, "prev_kv", Kind::boolean},
        {5, "ignore_value", Kind::boolean}, {6, "ignore_lease", Kind::boolean}}},
      {"PutResponse", {{1, "header", Kind::message, "ResponseHeader"}, {2, "prev_kv", Kind::message, "KeyValue"}}},
      {"DeleteRangeRequest", {{1, "key", Kind::bytes}, {2, "range_end", Kind::bytes}, {3, "prev_kv", Kind::boolean}}},
      {"DeleteRangeResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "deleted", Kind::int64},
        {3, "prev_kvs", Kind::message, "KeyValue", kRepeated}}},
      {"RequestOp",
       {{1, "request_range", Kind::message, "RangeRequest", false, kOneof},
        {2, "request_put", Kind::message, "PutRequest", false, kOneof},
        {3, "request_delete_range", Kind::message, "DeleteRangeRequest", false, kOneof},
        {4, "request_txn", Kind::message, "TxnRequest", false, kOneof}}},
      {"ResponseOp",
       {{1, "response_range", Kind::message, "RangeResponse", false, kOneof},
        {2, "response_put", Kind::message, "PutResponse", false, kOneof},
        {3, "response_delete_range", Kind::message, "DeleteRangeResponse", false, kOneof},
        {4, "response_txn", Kind::message, "TxnResponse", false, kOneof}}},
      {"Compare",
       {{1, "result", Kind::enumeration, "CompareResult"}, {2, "target", Kind::enumeration, "CompareTarget"},
        {3, "key", Kind::bytes}, {4, "version", Kind::int64, "", false, kOneof},
        {5, "create_revision", Kind::int64, "", false, kOneof}, {6, "mod_revision", Kind::int64, "", false, kOneof},
        {7, "value", Kind::bytes, "", false, kOneof}, {8, "lease", Kind::int64, "", false, kOneof},
        {64, "range_end", Kind::bytes}}},
      {"TxnRequest",
       {{1, "compare", Kind::message, "Compare", kRepeated}, {2, "success", Kind::message, "RequestOp", kRepeated},
        {3, "failure", Kind::message, "RequestOp", kRepeated}}},
      {"TxnResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "succeeded", Kind::boolean},
        {3, "responses", Kind::message, "ResponseOp", kRepeated}}},
      {"WatchRequest",
       {{1, "create_request", Kind::message, "WatchCreateRequest", false, kOneof},
        {2, "cancel_request", Kind::message, "WatchCancelRequest", false, kOneof},
        {3, "progress_request", Kind::message, "WatchProgressRequest", false, kOneof}}},
      {"WatchCreateRequest",
       {{1, "key", Kind::bytes}, {2, "range_end", Kind::bytes}, {3, "start_revision", Kind::int64},
        {4, "progress_notify", Kind::boolean}, {6, "prev_kv", Kind::boolean}, {7, "watch_id", Kind::int64},
        {8, "fragment", Kind::boolean}}},
      {"WatchCancelRequest", {{1, "watch_id", Kind::int64}}},
      {"WatchProgressRequest", {}},
      {"WatchResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "watch_id", Kind::int64}, {3, "created", Kind::boolean},
        {4, "canceled", Kind::boolean}, {5, "compact_revision", Kind::int64}, {6, "cancel_reason", Kind::string},
        {7, "fragment", Kind::boolean}, {11, "events", Kind::message, "Event", kRepeated}}},
      {"LeaseGrantRequest", {{1, "TTL", Kind::int64}, {2, "ID", Kind::int64}}},
      {"LeaseGrantResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "ID", Kind::int64}, {3, "TTL", Kind::int64},
        {4, "error", Kind::string}}},
      {"LeaseRevokeRequest", {{1, "ID", Kind::int64}}},
      {"LeaseRevokeResponse", {{1, "header", Kind::message, "ResponseHeader"}}},
      {"LeaseKeepAliveRequest", {{1, "ID", Kind::int64}}},
      {"LeaseKeepAliveResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "ID", Kind::int64}, {3, "TTL", Kind::int64}}},
      {"AuthenticateRequest", {{1, "name", Kind::string}, {2, "password", Kind::string}}},
      {"AuthenticateResponse", {{1, "header", Kind::message, "ResponseHeader"}, {2, "token", Kind::string}}},
      {"StatusRequest", {}},
      {"StatusResponse",
       {{1, "header", Kind::message, "ResponseHeader"}, {2, "version", Kind::string}, {3, "dbSize", Kind::int64},
        {4, "leader", Kind::uint64}, {5, "raftIndex", Kind::uint64}, {6, "raftTerm", Kind::uint64},
        {7, "raftAppliedIndex", Kind::uint64}, {8, "errors", Kind::string, "", kRepeated},
        {9, "dbSizeInUse", Kind::int64}, {10, "isLearner", Kind::boolean}}},
  };
  return table;
}

// Each enum's names, by value.
const std::vector<std::string>& enum_names(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"EventType", {"PUT", "DELETE"}},
      {"CompareResult", {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"}},
      {"CompareTarget", {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"}},
      {"SortOrder", {"NONE", "ASCEND", "DESCEND"}},
      {"SortTarget", {"KEY", "VERSION", "CREATE", "MOD", "VALUE"}},
  };
  return table.at(name);
}

struct Method {
  const char* path;
  const char* request;
  const char* response;
  bool streamed;  // the gateway wrapped each answer as {"result": ...}
};

const Method& method(const std::string& grpc_method) {
  static const std::map<std::string, Method> table = {
      {"/etcdserverpb.KV/Range", {"/v3/kv/range", "RangeRequest", "RangeResponse", false}},
      {"/etcdserverpb.KV/Put", {"/v3/kv/put", "PutRequest", "PutResponse", false}},
      {"/etcdserverpb.KV/DeleteRange", {"/v3/kv/deleterange", "DeleteRangeRequest", "DeleteRangeResponse", false}},
      {"/etcdserverpb.KV/Txn", {"/v3/kv/txn", "TxnRequest", "TxnResponse", false}},
      {"/etcdserverpb.Lease/LeaseGrant", {"/v3/lease/grant", "LeaseGrantRequest", "LeaseGrantResponse", false}},
      {"/etcdserverpb.Lease/LeaseKeepAlive",
       {"/v3/lease/keepalive", "LeaseKeepAliveRequest", "LeaseKeepAliveResponse", true}},
      {"/etcdserverpb.Lease/LeaseRevoke", {"/v3/lease/revoke", "LeaseRevokeRequest", "LeaseRevokeResponse", false}},
      {"/etcdserverpb.Watch/Watch", {"/v3/watch", "WatchRequest", "WatchResponse", true}},
      {"/etcdserverpb.Auth/Authenticate",
       {"/v3/auth/authenticate", "AuthenticateRequest", "AuthenticateResponse", false}},
      {"/etcdserverpb.Maintenance/Status", {"/v3/maintenance/status", "StatusRequest", "StatusResponse", false}},
  };
  auto it = table.find(grpc_method);
  if (it == table.end()) throw std::invalid_argument("gateway_json: no such method: " + grpc_method);
  return it->second;
}

[[noreturn]] void fail(const std::string& message, const FieldSpec& field, const std::string& why) {
  throw std::invalid_argument("gateway_json: " + message + "." + field.name + ": " + why);
}

// ---- protobuf -> JSON --------------------------------------------------------

json to_json(const std::string& message, std::string_view bytes);

json value_json(const std::string& message, const FieldSpec& spec, const pb::Field& f) {
  const bool varint = spec.kind == Kind::int64 || spec.kind == Kind::uint64 || spec.kind == Kind::boolean ||
                      spec.kind == Kind::enumeration;
  if (f.type != (varint ? pb::WireType::varint : pb::WireType::length_delimited))
    fail(message, spec, "wire type " + std::to_string(int(f.type)));
  switch (spec.kind) {
    case Kind::int64: return std::to_string(static_cast<int64_t>(f.value));
    case Kind::uint64: return std::to_string(f.value);
    case Kind::boolean: return f.value != 0;
    case Kind::enumeration: {
      const auto& names = enum_names(spec.type);
      if (f.value < names.size()) return names[f.value];
      return static_cast<int64_t>(f.value);  // proto3 JSON writes an unknown enum value as its number
    }
    case Kind::bytes: return cxxrun::etcd::base64_encode(f.bytes);
    case Kind::string: return std::string(f.bytes);
    case Kind::message: return to_json(spec.type, f.bytes);
  }
  return nullptr;
}

json to_json(const std::string& message, std::string_view bytes) {
  const auto& fields = messages().at(message);
  json out = json::object();
  pb::Reader r(bytes);
  try {
    while (auto f = r.next()) {
      auto spec = std::find_if(fields.begin(), fields.end(), [&](const FieldSpec& s) { return s.number == f->number; });
      if (spec == fields.end())
        throw std::invalid_argument("gateway_json: " + message + " has no field " + std::to_string(f->number));
      json value = value_json(message, *spec, *f);
      // A scalar at its default is left out, unless a oneof set it.
      const bool at_default = f->type == pb::WireType::varint ? f->value == 0 : f->bytes.empty();
      if (spec->repeated) out[spec->name].push_back(std::move(value));
      else if (at_default && !spec->oneof && spec->kind != Kind::message) out.erase(spec->name);
      else out[spec->name] = std::move(value);
    }
  } catch (const pb::Malformed& e) {
    throw std::invalid_argument("gateway_json: not a " + message + ": " + e.what());
  }
  return out;
}

// ---- JSON -> protobuf --------------------------------------------------------

std::string to_proto(const std::string& message, const json& object);

template <class Int>
Int integer(const std::string& message, const FieldSpec& spec, const json& value) {
  if (value.is_number_integer()) return value.get<Int>();
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    Int out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return out;
  }
  fail(message, spec, "not an integer: " + value.dump());
}

void write_value(pb::Writer& w, const std::string& message, const FieldSpec& spec, const json& value) {
  const bool always = spec.oneof || spec.repeated;
  auto varint = [&](uint64_t v) { always ? w.varint_always(spec.number, v) : w.varint(spec.number, v); };
  auto bytes = [&](std::string_view v) { always ? w.bytes_always(spec.number, v) : w.bytes(spec.number, v); };
  switch (spec.kind) {
    case Kind::int64: return varint(static_cast<uint64_t>(integer<int64_t>(message, spec, value)));
    case Kind::uint64: return varint(integer<uint64_t>(message, spec, value));
    case Kind::boolean:
      if (!value.is_boolean()) fail(message, spec, "not a bool: " + value.dump());
      return varint(value.get<bool>() ? 1 : 0);
    case Kind::enumeration: {
      if (!value.is_string()) return varint(static_cast<uint64_t>(integer<int64_t>(message, spec, value)));
      const auto& names = enum_names(spec.type);
      auto it = std::find(names.begin(), names.end(), value.get<std::string>());
      if (it == names.end()) fail(message, spec, "no such " + std::string(spec.type) + ": " + value.dump());
      return varint(static_cast<uint64_t>(it - names.begin()));
    }
    case Kind::bytes: {
      if (!value.is_string()) fail(message, spec, "not base64: " + value.dump());
      auto decoded = cxxrun::etcd::base64_decode(value.get<std::string>());
      if (!decoded) fail(message, spec, "not base64: " + value.dump());
      return bytes(*decoded);
    }
    case Kind::string:
      if (!value.is_string()) fail(message, spec, "not a string: " + value.dump());
      return bytes(value.get<std::string>());
    case Kind::message:
      if (!value.is_object()) fail(message, spec, "not an object: " + value.dump());
      w.message(spec.number, to_proto(spec.type, value));
      return;
  }
}

std::string to_proto(const std::string& message, const json& object) {
  if (!object.is_object())
    throw std::invalid_argument("gateway_json: a " + message + " is an object: " + object.dump());
  const auto& fields = messages().at(message);
  for (const auto& [name, value] : object.items())
    if (std::none_of(fields.begin(), fields.end(), [&](const FieldSpec& s) { return name == s.name; }))
      throw std::invalid_argument("gateway_json: " + message + " has no field '" + name + "'");
  pb::Writer w;
  for (const auto& spec : fields) {
    auto it = object.find(spec.name);
    if (it == object.end() || it->is_null()) continue;
    if (!spec.repeated) {
      write_value(w, message, spec, *it);
      continue;
    }
    if (!it->is_array()) fail(message, spec, "not an array: " + it->dump());
    for (const auto& element : *it) write_value(w, message, spec, element);
  }
  return w.take();
}

json parse(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw std::invalid_argument("gateway_json: not JSON: " + text.substr(0, 200));
  return doc;
}

std::string dump(const json& doc) { return doc.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string gateway_path(const std::string& grpc_method) { return method(grpc_method).path; }

std::string request_json(const std::string& grpc_method, std::string_view request_proto) {
  return dump(to_json(method(grpc_method).request, request_proto));
}

std::string response_proto(const std::string& grpc_method, const std::string& answer_json) {
  const Method& m = method(grpc_method);
  json doc = parse(answer_json);
  if (m.streamed && doc.is_object() && doc.contains("result")) doc = doc["result"];
  return to_proto(m.response, doc);
}

std::string request_proto(const std::string& grpc_method, const std::string& request_json) {
  return to_proto(method(grpc_method).request, parse(request_json));
}

std::string response_json(const std::string& grpc_method, std::string_view response_proto) {
  return dump(to_json(method(grpc_method).response, response_proto));
}

std::optional<GrpcStatus> error_status(const std::string& answer_json) {
  json doc = json::parse(answer_json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("error")) return std::nullopt;
  const json& error = doc["error"];
  auto text = [](const json& object, const char* name) {
    auto it = object.find(name);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto number = [](const json& object, const char* name) {
    auto it = object.find(name);
    return it != object.end() && it->is_number_integer() ? it->get<int>() : 0;
  };
  if (error.is_object()) return GrpcStatus{number(error, "grpc_code"), text(error, "message")};  // streamed
  // Unary; without "code" it is a LeaseGrantResponse's own error field.
  if (!error.is_string() || !doc.contains("code")) return std::nullopt;
  auto message = text(doc, "message");
  return GrpcStatus{number(doc, "code"), message.empty() ? error.get<std::string>() : message};
}

}  // namespace etcd_gateway
