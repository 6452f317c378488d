#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "etcd/wire.h"

using namespace cxxrun::etcd;
using json = nlohmann::json;

TEST_CASE("etcd wire: keys and values go out as base64, int64s as strings") {
  auto put = json::parse(wire::put_request("/a", std::string("v\0w", 3), 7));
  CHECK(put == json{{"key", "L2E="}, {"value", "dgB3"}, {"lease", "7"}});
  CHECK(json::parse(wire::put_request("k", "", 0)) == json{{"key", "aw=="}, {"value", ""}});
  CHECK(json::parse(wire::range_request("a", "b")) == json{{"key", "YQ=="}, {"range_end", "Yg=="}});
  CHECK(json::parse(wire::range_request("a", "")) == json{{"key", "YQ=="}});
  CHECK(json::parse(wire::lease_grant_request(5)) == json{{"TTL", "5"}});
  CHECK(json::parse(wire::lease_id_request(-3)) == json{{"ID", "-3"}});
  CHECK(json::parse(wire::authenticate_request("u", "p")) == json{{"name", "u"}, {"password", "p"}});
  CHECK(json::parse(wire::watch_create_request("p", "q", 0)) ==
        json{{"create_request", {{"key", "cA=="}, {"range_end", "cQ=="}, {"progress_notify", true}}}});
  CHECK(json::parse(wire::watch_create_request("p", "", 12)) ==
        json{{"create_request", {{"key", "cA=="}, {"start_revision", "12"}, {"progress_notify", true}}}});
}

TEST_CASE("etcd wire: a transaction's compares and operations") {
  auto txn = json::parse(wire::txn_request(
      {Compare::value_is("k", Compare::Result::equal, "v"),
       Compare::create_revision_is("k", Compare::Result::less, 3),
       Compare::version_is("k", Compare::Result::greater, 1),
       Compare::mod_revision_is("k", Compare::Result::not_equal, 9)},
      {Op::put("k", "n", 4), Op::get_prefix("p/")}, {Op::del("k"), Op::del_prefix("")}));
  CHECK(txn["compare"][0] == json{{"key", "aw=="}, {"target", "VALUE"}, {"result", "EQUAL"}, {"value", "dg=="}});
  CHECK(txn["compare"][1] ==
        json{{"key", "aw=="}, {"target", "CREATE"}, {"result", "LESS"}, {"create_revision", "3"}});
  CHECK(txn["compare"][2] == json{{"key", "aw=="}, {"target", "VERSION"}, {"result", "GREATER"}, {"version", "1"}});
  CHECK(txn["compare"][3] ==
        json{{"key", "aw=="}, {"target", "MOD"}, {"result", "NOT_EQUAL"}, {"mod_revision", "9"}});
  CHECK(txn["success"][0] == json{{"request_put", {{"key", "aw=="}, {"value", "bg=="}, {"lease", "4"}}}});
  CHECK(txn["success"][1] == json{{"request_range", {{"key", "cC8="}, {"range_end", "cDA="}}}});
  CHECK(txn["failure"][0] == json{{"request_delete_range", {{"key", "aw=="}}}});
  // Every key: from "\0" to "\0".
  CHECK(txn["failure"][1] == json{{"request_delete_range", {{"key", "AA=="}, {"range_end", "AA=="}}}});
}

TEST_CASE("etcd wire: prefix range ends") {
  CHECK(prefix_range_end("a/") == "a0");
  CHECK(prefix_range_end("ab") == "ac");
  CHECK(prefix_range_end(std::string("a\xff", 2)) == "b");
  CHECK(prefix_range_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
  CHECK(prefix_range_end("") == std::string(1, '\0'));
}

TEST_CASE("etcd wire: int64 fields as strings or numbers, absent ones as 0") {
  auto r = wire::parse_get(
      R"({"header":{"cluster_id":"1","member_id":"2","revision":"42","raft_term":"2"},)"
      R"("kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":40,"version":"3","value":"YmFy","lease":"7"}],"count":"1"})");
  CHECK(r.revision == 42);
  REQUIRE(r.kv);
  CHECK(r.kv->key == "foo");
  CHECK(r.kv->value == "bar");
  CHECK(r.kv->create_revision == 2);
  CHECK(r.kv->mod_revision == 40);
  CHECK(r.kv->version == 3);
  CHECK(r.kv->lease == 7);
  auto absent = wire::parse_get(R"({"header":{"revision":"5"}})");
  CHECK(absent.revision == 5);
  CHECK_FALSE(absent.kv);
  // An empty value is left out altogether.
  auto empty = wire::parse_range(R"({"header":{},"kvs":[{"key":"YQ==","create_revision":"1","mod_revision":"1","version":"1"}]})");
  REQUIRE(empty.kvs.size() == 1);
  CHECK(empty.kvs[0].value.empty());
  CHECK(empty.revision == 0);
}

TEST_CASE("etcd wire: a page of a range, and whether keys remain after it") {
  CHECK(json::parse(wire::range_page_request("a", "b", 2048, 0)) ==
        json{{"key", "YQ=="}, {"range_end", "Yg=="}, {"limit", "2048"}});
  CHECK(json::parse(wire::range_page_request("a", "b", 2048, 17)) ==
        json{{"key", "YQ=="}, {"range_end", "Yg=="}, {"limit", "2048"}, {"revision", "17"}});
  CHECK(wire::parse_range(R"({"header":{"revision":"5"},"kvs":[{"key":"YQ=="}],"more":true,"count":"3"})").more);
  CHECK_FALSE(wire::parse_range(R"({"header":{"revision":"5"},"kvs":[{"key":"YQ=="}],"count":"1"})").more);
}

TEST_CASE("etcd wire: a range answered by its size, or by keys without values") {
  CHECK(json::parse(wire::range_request("a", "b", wire::RangeShape::count_only)) ==
        json{{"key", "YQ=="}, {"range_end", "Yg=="}, {"count_only", true}});
  CHECK(json::parse(wire::range_request("a", "b", wire::RangeShape::keys_only)) ==
        json{{"key", "YQ=="}, {"range_end", "Yg=="}, {"keys_only", true}});
  auto counted = wire::parse_count(R"({"header":{"revision":"41"},"count":"1000"})");
  CHECK(counted.revision == 41);
  CHECK(counted.count == 1000);
  // proto3 leaves a zero count out.
  CHECK(wire::parse_count(R"({"header":{"revision":"7"}})").count == 0);
  CHECK_THROWS_AS(wire::parse_count(R"({"header":{},"count":"many"})"), wire::Malformed);
}

TEST_CASE("etcd wire: answers that do not parse") {
  CHECK_THROWS_AS(wire::parse_get("not json"), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_get(R"({"header":{"revision":"x"}})"), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_get(R"({"kvs":[{"key":"!!"}]})"), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_get(R"({"kvs":{}})"), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_token(R"({"header":{}})"), wire::Malformed);
}

TEST_CASE("etcd wire: put, delete, lease and auth answers") {
  CHECK(wire::parse_revision(R"({"header":{"revision":"9"}})") == 9);
  CHECK(wire::parse_deleted(R"({"header":{"revision":"9"},"deleted":"3"})") == 3);
  CHECK(wire::parse_deleted(R"({"header":{"revision":"9"}})") == 0);
  auto lease = wire::parse_lease_grant(R"({"header":{},"ID":"5986869437100460808","TTL":"5"})");
  CHECK(lease.id == 5986869437100460808);
  CHECK(lease.ttl == 5);
  CHECK(wire::parse_keep_alive(R"({"result":{"header":{},"ID":"1","TTL":"5"}})") == 5);
  CHECK(wire::parse_keep_alive(R"({"result":{"header":{},"ID":"1"}})") == 0);  // gone
  CHECK(wire::parse_keep_alive(R"({"header":{},"ID":"1","TTL":"4"})") == 4);
  CHECK(wire::parse_token(R"({"header":{},"token":"abc.12"})") == "abc.12");
  CHECK(wire::parse_member_id(R"({"header":{"cluster_id":"1","member_id":"13049071153751544597"}})") ==
        "13049071153751544597");
  CHECK(wire::parse_member_id("{}").empty());
  CHECK(wire::parse_status_leader(R"({"header":{},"leader":"13049071153751544597"})") == "13049071153751544597");
  CHECK(wire::parse_status_leader(R"({"header":{},"leader":"0"})").empty());
  CHECK(wire::parse_status_leader(R"({"header":{}})").empty());
}

TEST_CASE("etcd wire: transaction answers") {
  auto t = wire::parse_txn(
      R"({"header":{"revision":"4"},"succeeded":true,"responses":[)"
      R"({"response_range":{"header":{"revision":"3"},"kvs":[{"key":"aw==","value":"dg==","mod_revision":"3"}],"count":"1"}},)"
      R"({"response_put":{"header":{"revision":"4"}}},)"
      R"({"response_delete_range":{"header":{"revision":"4"},"deleted":"1"}}]})");
  CHECK(t.succeeded);
  CHECK(t.revision == 4);
  REQUIRE(t.responses.size() == 3);
  CHECK(t.responses[0].kind == Op::Kind::range);
  CHECK(t.responses[0].kvs.at(0).value == "v");
  CHECK(t.responses[1].kind == Op::Kind::put);
  CHECK(t.responses[1].revision == 4);
  CHECK(t.responses[2].kind == Op::Kind::delete_range);
  CHECK(t.responses[2].deleted == 1);
  // succeeded false is left out.
  auto f = wire::parse_txn(R"({"header":{"revision":"4"},"responses":[{"response_range":{"header":{}}}]})");
  CHECK_FALSE(f.succeeded);
  CHECK(f.responses.at(0).kvs.empty());
  CHECK_THROWS_AS(wire::parse_txn(R"({"responses":[{"response_x":{}}]})"), wire::Malformed);
}

TEST_CASE("etcd wire: error answers, unary and streamed") {
  auto unary = wire::parse_error(R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})");
  REQUIRE(unary);
  CHECK(unary->code == 14);
  CHECK(unary->message == "etcdserver: no leader");
  auto streamed = wire::parse_error(
      R"({"error":{"grpc_code":16,"http_code":401,"message":"etcdserver: invalid auth token","http_status":"Unauthorized"}})");
  REQUIRE(streamed);
  CHECK(streamed->code == 16);
  CHECK(streamed->message == "etcdserver: invalid auth token");
  CHECK_FALSE(wire::parse_error("Not Found"));
  CHECK_FALSE(wire::parse_error(R"({"header":{}})"));
}

TEST_CASE("etcd wire: watch messages") {
  using Kind = wire::WatchMessage::Kind;
  auto created = wire::parse_watch_message(R"({"result":{"header":{"revision":"4"},"created":true}})");
  CHECK(created.kind == Kind::created);
  CHECK(created.revision == 4);
  auto events = wire::parse_watch_message(
      R"({"result":{"header":{"revision":"7"},"events":[{"kv":{"key":"YQ==","value":"MQ==","mod_revision":"5","create_revision":"5","version":"1"}},)"
      R"({"type":"DELETE","kv":{"key":"Yg==","mod_revision":"6"}}]}})");
  CHECK(events.kind == Kind::events);
  REQUIRE(events.events.size() == 2);
  CHECK(events.events[0].type == WatchEvent::Type::put);
  CHECK(events.events[0].kv.value == "1");
  CHECK(events.events[0].kv.mod_revision == 5);
  CHECK(events.events[1].type == WatchEvent::Type::del);
  CHECK(events.events[1].kv.key == "b");
  auto compacted = wire::parse_watch_message(
      R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"5"}})");
  CHECK(compacted.kind == Kind::canceled);
  CHECK(compacted.compact_revision == 5);
  CHECK(wire::parse_watch_message(R"({"result":{"header":{"revision":"9"}}})").kind == Kind::progress);
  auto error = wire::parse_watch_message(R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})");
  CHECK(error.kind == Kind::error);
  CHECK(error.error.message == "etcdserver: no leader");
  CHECK_THROWS_AS(wire::parse_watch_message(R"({"result":{"events":[{"type":"OTHER","kv":{}}]}})"),
                  wire::Malformed);
  CHECK_THROWS_AS(wire::parse_watch_message(R"({"nothing":1})"), wire::Malformed);
}

TEST_CASE("etcd wire: the raft term of an answer") {
  CHECK(wire::parse_raft_term(R"({"header":{"cluster_id":"1","member_id":"2","revision":"5","raft_term":"7"}})") == 7);
  CHECK(wire::parse_raft_term(R"({"header":{"raft_term":8}})") == 8);
  CHECK(wire::parse_raft_term(R"({"header":{"member_id":"2"}})") == 0);
}
