#include "etcd/wire.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "etcd/base64.h"

namespace cxxrun::etcd::wire {
namespace {

using json = nlohmann::json;

json parse_object(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    auto shown = body.substr(0, 120);
    throw Malformed("malformed answer (not a JSON object): " + std::string(shown));
  }
  return doc;
}

const json* member(const json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// proto3 JSON writes int64 as a string; numbers are legal too. Absent: 0.
int64_t int_field(const json& object, const char* name) {
  const json* v = member(object, name);
  if (!v) return 0;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    int64_t out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return out;
  }
  throw Malformed(std::string("malformed answer: field '") + name + "' is not an int64: " + v->dump());
}

bool bool_field(const json& object, const char* name) {
  const json* v = member(object, name);
  if (!v) return false;
  if (!v->is_boolean()) throw Malformed(std::string("malformed answer: field '") + name + "' is not a bool");
  return v->get<bool>();
}

std::string string_field(const json& object, const char* name) {
  const json* v = member(object, name);
  if (!v) return {};
  if (!v->is_string()) throw Malformed(std::string("malformed answer: field '") + name + "' is not a string");
  return v->get<std::string>();
}

std::string bytes_field(const json& object, const char* name) {
  auto decoded = base64_decode(string_field(object, name));
  if (!decoded) throw Malformed(std::string("malformed answer: field '") + name + "' is not base64");
  return *decoded;
}

const json& object_field(const json& object, const char* name) {
  static const json empty = json::object();
  const json* v = member(object, name);
  if (!v) return empty;
  if (!v->is_object()) throw Malformed(std::string("malformed answer: field '") + name + "' is not an object");
  return *v;
}

const json& array_field(const json& object, const char* name) {
  static const json empty = json::array();
  const json* v = member(object, name);
  if (!v) return empty;
  if (!v->is_array()) throw Malformed(std::string("malformed answer: field '") + name + "' is not an array");
  return *v;
}

int64_t header_revision(const json& response) { return int_field(object_field(response, "header"), "revision"); }

KeyValue key_value(const json& kv) {
  KeyValue out;
  out.key = bytes_field(kv, "key");
  out.value = bytes_field(kv, "value");
  out.create_revision = int_field(kv, "create_revision");
  out.mod_revision = int_field(kv, "mod_revision");
  out.version = int_field(kv, "version");
  out.lease = int_field(kv, "lease");
  return out;
}

std::vector<KeyValue> kvs(const json& response) {
  std::vector<KeyValue> out;
  for (const auto& kv : array_field(response, "kvs")) out.push_back(key_value(kv));
  return out;
}

// A key and, for a range, its end: the fields every keyed request shares.
json keyed(const std::string& key, const std::string& range_end) {
  json request = {{"key", base64_encode(key)}};
  if (!range_end.empty()) request["range_end"] = base64_encode(range_end);
  return request;
}

json txn_json(const std::vector<Compare>& compares, const std::vector<Op>& success, const std::vector<Op>& failure);

json op_json(const Op& op) {
  switch (op.kind) {
    case Op::Kind::txn:
      return {{"request_txn", txn_json(op.compares, op.success, op.failure)}};
    case Op::Kind::put: {
      json put = keyed(op.key, "");
      put["value"] = base64_encode(op.value);
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return {{"request_put", put}};
    }
    case Op::Kind::range:
      return {{"request_range", keyed(op.key, op.range_end)}};
    case Op::Kind::delete_range:
      return {{"request_delete_range", keyed(op.key, op.range_end)}};
  }
  return {};
}

json compare_json(const Compare& c) {
  static const char* const kTargets[] = {"VALUE", "VERSION", "CREATE", "MOD"};
  static const char* const kFields[] = {"value", "version", "create_revision", "mod_revision"};
  static const char* const kResults[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
  auto target = static_cast<size_t>(c.target);
  json out = {{"key", base64_encode(c.key)},
              {"target", kTargets[target]},
              {"result", kResults[static_cast<size_t>(c.result)]}};
  if (c.target == Compare::Target::value) out["value"] = base64_encode(c.value);
  else out[kFields[target]] = std::to_string(c.number);
  return out;
}

json txn_json(const std::vector<Compare>& compares, const std::vector<Op>& success, const std::vector<Op>& failure) {
  json out = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) out["compare"].push_back(compare_json(c));
  for (const auto& op : success) out["success"].push_back(op_json(op));
  for (const auto& op : failure) out["failure"].push_back(op_json(op));
  return out;
}

}  // namespace

std::string range_request(const std::string& key, const std::string& range_end) {
  return keyed(key, range_end).dump();
}

std::string range_request(const std::string& key, const std::string& range_end, RangeShape shape) {
  json request = keyed(key, range_end);
  request[shape == RangeShape::count_only ? "count_only" : "keys_only"] = true;
  return request.dump();
}

std::string range_at_request(const std::string& key, int64_t revision) {
  json request = keyed(key, "");
  request["revision"] = std::to_string(revision);
  return request.dump();
}

std::string range_page_request(const std::string& key, const std::string& range_end, int64_t limit, int64_t revision) {
  json request = keyed(key, range_end);
  request["limit"] = std::to_string(limit);
  if (revision != 0) request["revision"] = std::to_string(revision);
  return request.dump();
}

std::string put_request(const std::string& key, const std::string& value, int64_t lease) {
  return op_json(Op::put(key, value, lease))["request_put"].dump();
}

std::string delete_request(const std::string& key, const std::string& range_end) {
  return keyed(key, range_end).dump();
}

std::string txn_request(const std::vector<Compare>& compares, const std::vector<Op>& success,
                        const std::vector<Op>& failure) {
  return txn_json(compares, success, failure).dump();
}

std::string lease_grant_request(int64_t ttl_seconds) { return json{{"TTL", std::to_string(ttl_seconds)}}.dump(); }

std::string lease_id_request(int64_t id) { return json{{"ID", std::to_string(id)}}.dump(); }

std::string authenticate_request(const std::string& name, const std::string& password) {
  // The only strings here that are not base64: bytes that are not UTF-8
  // must not make dump() throw.
  return json{{"name", name}, {"password", password}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string watch_create_request(const std::string& key, const std::string& range_end, int64_t start_revision) {
  json create = keyed(key, range_end);
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  // A quiet watch still learns the current revision (every 10 minutes by
  // etcd's default), so resuming it after a member fails starts near now,
  // not where it was created, which compaction may have dropped.
  create["progress_notify"] = true;
  return json{{"create_request", create}}.dump();
}

GetResult parse_get(std::string_view body) {
  json doc = parse_object(body);
  GetResult out;
  out.revision = header_revision(doc);
  auto all = kvs(doc);
  if (!all.empty()) out.kv = std::move(all.front());
  return out;
}

RangeResult parse_range(std::string_view body) {
  json doc = parse_object(body);
  return RangeResult{header_revision(doc), kvs(doc), bool_field(doc, "more")};
}

CountResult parse_count(std::string_view body) {
  json doc = parse_object(body);
  return CountResult{header_revision(doc), int_field(doc, "count")};
}

int64_t parse_revision(std::string_view body) { return header_revision(parse_object(body)); }

int64_t parse_deleted(std::string_view body) { return int_field(parse_object(body), "deleted"); }

TxnResult parse_txn(std::string_view body) {
  json doc = parse_object(body);
  TxnResult out;
  out.succeeded = bool_field(doc, "succeeded");
  out.revision = header_revision(doc);
  for (const auto& r : array_field(doc, "responses")) {
    OpResult op;
    if (const json* range = member(r, "response_range")) {
      op.kind = Op::Kind::range;
      op.revision = header_revision(*range);
      op.kvs = kvs(*range);
    } else if (const json* put = member(r, "response_put")) {
      op.kind = Op::Kind::put;
      op.revision = header_revision(*put);
    } else if (const json* del = member(r, "response_delete_range")) {
      op.kind = Op::Kind::delete_range;
      op.revision = header_revision(*del);
      op.deleted = int_field(*del, "deleted");
    } else if (const json* txn = member(r, "response_txn")) {
      op.kind = Op::Kind::txn;
      op.revision = header_revision(*txn);
      op.succeeded = bool_field(*txn, "succeeded");
    } else {
      throw Malformed("malformed answer: a txn response of unknown kind: " + r.dump());
    }
    out.responses.push_back(std::move(op));
  }
  return out;
}

Lease parse_lease_grant(std::string_view body) {
  json doc = parse_object(body);
  if (auto error = string_field(doc, "error"); !error.empty()) throw Malformed("lease grant refused: " + error);
  return Lease{int_field(doc, "ID"), int_field(doc, "TTL")};
}

int64_t parse_keep_alive(std::string_view body) {
  json doc = parse_object(body);
  // The gateway streams keep-alive, so even one answer comes wrapped.
  if (const json* result = member(doc, "result")) return std::max<int64_t>(0, int_field(*result, "TTL"));
  if (member(doc, "error")) throw Malformed("malformed answer: a keep-alive stream error: " + doc.dump());
  return std::max<int64_t>(0, int_field(doc, "TTL"));
}

std::string parse_token(std::string_view body) {
  auto token = string_field(parse_object(body), "token");
  if (token.empty()) throw Malformed("malformed answer: authenticate gave no token");
  return token;
}

namespace {

// The text of header field `name` ("member_id", "raft_term"), unquoted;
// empty when absent. Looked for only in the first bytes, where the gateway
// puts the header, so that every answer can afford it.
std::string_view header_text(std::string_view body, std::string_view name) {
  auto head = body.substr(0, 512);
  const std::string field = "\"" + std::string(name) + "\":";
  auto at = head.find(field);
  if (at == std::string_view::npos) return {};
  auto start = at + field.size();
  const bool quoted = start < head.size() && head[start] == '"';  // proto3 JSON writes 64-bit ints as strings
  if (quoted) ++start;
  auto end = quoted ? head.find('"', start) : head.find_first_of(",}", start);
  return end == std::string_view::npos ? std::string_view() : head.substr(start, end - start);
}

}  // namespace

std::string parse_member_id(std::string_view body) { return std::string(header_text(body, "member_id")); }

int64_t parse_raft_term(std::string_view body) {
  const auto text = header_text(body, "raft_term");
  int64_t term = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), term);
  return ec == std::errc() && end == text.data() + text.size() ? term : 0;
}

std::string parse_status_leader(std::string_view body) {
  json doc = parse_object(body);
  const json* leader = member(doc, "leader");
  if (!leader) return {};
  std::string id = leader->is_string() ? leader->get<std::string>() : leader->dump();
  return id == "0" ? std::string() : id;
}

std::optional<ServerError> parse_error(std::string_view body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  try {
    const json* error = member(doc, "error");
    if (!error) return std::nullopt;
    if (error->is_object())  // streamed
      return ServerError{static_cast<int>(int_field(*error, "grpc_code")), string_field(*error, "message")};
    auto message = string_field(doc, "message");
    return ServerError{static_cast<int>(int_field(doc, "code")),
                       message.empty() ? string_field(doc, "error") : message};
  } catch (const Malformed&) {
    return std::nullopt;
  }
}

WatchMessage parse_watch_message(std::string_view object) {
  json doc = parse_object(object);
  WatchMessage out;
  if (member(doc, "error")) {
    out.kind = WatchMessage::Kind::error;
    auto error = parse_error(object);
    if (!error) throw Malformed("malformed answer: a watch stream error: " + doc.dump());
    out.error = *error;
    return out;
  }
  const json* result = member(doc, "result");
  if (!result || !result->is_object()) throw Malformed("malformed answer: a watch message without result");
  out.revision = header_revision(*result);
  for (const auto& e : array_field(*result, "events")) {
    WatchEvent event;
    auto type = string_field(e, "type");
    if (type == "DELETE") event.type = WatchEvent::Type::del;
    else if (type.empty() || type == "PUT") event.type = WatchEvent::Type::put;
    else throw Malformed("malformed answer: a watch event of type " + type);
    event.kv = key_value(object_field(e, "kv"));
    out.events.push_back(std::move(event));
  }
  if (bool_field(*result, "canceled")) {
    out.kind = WatchMessage::Kind::canceled;
    out.compact_revision = int_field(*result, "compact_revision");
    out.cancel_reason = string_field(*result, "cancel_reason");
  } else if (bool_field(*result, "created")) {
    out.kind = WatchMessage::Kind::created;
  } else if (!out.events.empty()) {
    out.kind = WatchMessage::Kind::events;
  }
  return out;
}

}  // namespace cxxrun::etcd::wire
