// The requests bench/etcd_sim.cc sends, as the JSON of etcd's v3 gateway
// (keys and values base64, int64s as strings; etcd_sim_proto.h turns them
// into protobuf): the messages etcd/wire.cc writes for each call EtcdStore
// and EtcdLiveness make. Built here, outside the
// coroutines: GCC 12 cannot keep a braced initializer list alive across a
// co_await ("array used as initializer").
#pragma once

#include <string>
#include <vector>

#include "etcd_sim_loop.h"

namespace etcd_sim::body {

inline json keyed(const std::string& k) { return json{{"key", b64(k)}}; }
inline json at_revision(const std::string& k, int64_t revision) {
  return json{{"key", b64(k)}, {"revision", std::to_string(revision)}};
}

// A range of [from, to): count_only or keys_only.
inline json span(const std::string& from, const std::string& to, const char* shape) {
  json r = {{"key", b64(from)}, {"range_end", b64(to)}};
  r[shape] = true;
  return r;
}

// At most `limit` keys of [from, to) with values, as of `revision` (0: now).
inline json page(const std::string& from, const std::string& to, int64_t limit, int64_t revision) {
  json r = {{"key", b64(from)}, {"range_end", b64(to)}, {"limit", std::to_string(limit)}};
  if (revision != 0) r["revision"] = std::to_string(revision);
  return r;
}

inline json put(const std::string& k, const std::string& v, int64_t lease = 0) {
  json r = {{"key", b64(k)}, {"value", b64(v)}};
  if (lease != 0) r["lease"] = std::to_string(lease);
  return r;
}

inline json op_put(const std::string& k, const std::string& v, int64_t lease = 0) {
  return json{{"request_put", put(k, v, lease)}};
}
inline json op_range(const std::string& k) { return json{{"request_range", keyed(k)}}; }

inline json absent(const std::string& k) {
  return json{{"key", b64(k)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}};
}
inline json value_is(const std::string& k, const std::string& v) {
  return json{{"key", b64(k)}, {"target", "VALUE"}, {"result", "EQUAL"}, {"value", b64(v)}};
}
inline json version_is(const std::string& k, int64_t version, const char* result) {
  return json{{"key", b64(k)}, {"target", "VERSION"}, {"result", result}, {"version", std::to_string(version)}};
}
inline json mod_is(const std::string& k, int64_t revision) {
  return json{{"key", b64(k)}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(revision)}};
}

inline json txn(std::vector<json> compare, std::vector<json> success, std::vector<json> failure) {
  json r = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (auto& c : compare) r["compare"].push_back(std::move(c));
  for (auto& o : success) r["success"].push_back(std::move(o));
  for (auto& o : failure) r["failure"].push_back(std::move(o));
  return r;
}

// compare_set_and_set's txn: compare_set's, with the other key's put on both branches.
inline json compare_set_and_set(const std::string& k, const std::string& desired, const std::string& k2,
                                const std::string& v2) {
  return txn({absent(k)}, {op_put(k, desired), op_put(k2, v2)}, {op_range(k), op_put(k2, v2)});
}
// compare_set's txn: put if the key is as expected (absent, or `expected`), else read it.
inline json compare_set(const std::string& k, const std::string& expected, const std::string& desired) {
  return txn({expected.empty() ? absent(k) : value_is(k, expected)}, {op_put(k, desired)}, {op_range(k)});
}

// add(k, 1): [put k, range k, put marker] if the marker is absent, else read the marker.
inline json add(const std::string& k, const std::string& marker, const std::string& record = "") {
  return txn({absent(marker)}, {op_put(k, ""), op_range(k), op_put(marker, record)}, {op_range(marker)});
}

// append's txn: the new value if the key is unchanged since it was read (mod_revision 0: absent).
inline json append(const std::string& k, const std::string& next, int64_t mod_revision) {
  return txn({mod_revision ? mod_is(k, mod_revision) : absent(k)}, {op_put(k, next)}, {});
}

// keys[at, at + n): a txn of ranges, or of puts of `values`.
inline json ranges(const std::vector<std::string>& keys, size_t at, size_t n) {
  json r = txn({}, {}, {});
  for (size_t i = at; i < std::min(keys.size(), at + n); ++i) r["success"].push_back(op_range(keys[i]));
  return r;
}
inline json puts(const std::vector<std::string>& keys, const std::vector<std::string>& values, size_t at, size_t n) {
  json r = txn({}, {}, {});
  for (size_t i = at; i < std::min(keys.size(), at + n); ++i) r["success"].push_back(op_put(keys[i], values[i]));
  return r;
}


inline json prefix(const std::string& p, const std::string& end) { return json{{"key", b64(p)}, {"range_end", b64(end)}}; }

// A watch's create_request: one key, or [key, range_end), from a revision.
inline json watch(const std::string& k, const std::string& range_end, int64_t from) {
  json c = {{"key", b64(k)}, {"progress_notify", true}, {"start_revision", std::to_string(from)}};
  if (!range_end.empty()) c["range_end"] = b64(range_end);
  return c;
}

inline json lease_id(int64_t id) { return json{{"ID", std::to_string(id)}}; }
inline json ttl(int64_t seconds) { return json{{"TTL", std::to_string(seconds)}}; }

}  // namespace etcd_sim::body
