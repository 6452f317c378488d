// EtcdStore::add (rendezvous/etcd_store.h) against a fake member that
// times its first proposal out, as an overloaded etcd does: the add is sent
// again and counts once.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "etcd/base64.h"
#include "fake_etcd_member.h"
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/etcd_store.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using EtcdMember = FakeEtcdMember;

namespace {

const std::string kAddHeader = R"("header":{"cluster_id":"1","member_id":"222","revision":"12"})";

std::string kv(const std::string& key, int create_revision, int version) {
  return R"({"key":")" + etcd::base64_encode(key) + R"(","create_revision":")" + std::to_string(create_revision) +
         R"(","mod_revision":")" + std::to_string(create_revision) + R"(","version":")" + std::to_string(version) +
         R"("})";
}

const std::string kTimedOut =
    EtcdMember::answer(503, R"({"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14})");

rendezvous::EtcdSettings add_settings_for(const EtcdMember& m) {
  rendezvous::EtcdSettings s;
  s.endpoints = rendezvous::parse_etcd_endpoints({m.endpoint()}, false);
  s.prefix = "/p";
  return s;
}

}  // namespace

// At 10,000 agents joining at once, etcd timed its own proposals out and
// each such join failed: "it may or may not have been applied".
TEST_CASE("etcd store: an add etcd may have applied is sent again and counts once") {
  const std::string counter = "/p/r0/count";
  int txns = 0;
  bool first_applied = false;
  SECTION("the first send had applied: the count as of its revision") { first_applied = true; }
  SECTION("the first send had not applied: the second counts") {}
  std::string range_body;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/txn") {
      if (txns++ == 0) return kTimedOut;
      if (first_applied)  // the marker is there, created at revision 9
        return EtcdMember::ok("{" + kAddHeader + R"(,"succeeded":false,"responses":[{"response_range":{"kvs":[)" +
                          kv("/p/r0/count/adds/x", 9, 1) + R"(],"count":"1"}}]})");
      return EtcdMember::ok("{" + kAddHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},{"response_range":{"kvs":[)" +
                        kv(counter, 2, 4) + R"(],"count":"1"}},{"response_put":{}}]})");
    }
    if (r.target == "/v3/kv/range") {
      range_body = r.body;
      return EtcdMember::ok("{" + kAddHeader + R"(,"kvs":[)" + kv(counter, 2, 3) + R"(],"count":"1"})");
    }
    return EtcdMember::answer(404, "Not Found");
  });
  rendezvous::EtcdStore store(add_settings_for(member), 5s);
  const int64_t count = store.add("r0/count", 1);
  CHECK(txns == 2);
  if (first_applied) {
    CHECK(count == 3);  // the version the counter had at revision 9, not now
    CHECK(range_body.find(R"("revision":"9")") != std::string::npos);
  } else {
    CHECK(count == 4);
    CHECK(range_body.empty());
  }
  // Both sends carried the same marker: a retry is the same add.
  const auto txn_bodies = [&] {
    std::vector<std::string> out;
    for (const auto& r : member.requests())
      if (r.target == "/v3/kv/txn") out.push_back(r.body);
    return out;
  }();
  REQUIRE(txn_bodies.size() == 2);
  CHECK(txn_bodies[0] == txn_bodies[1]);
}

// A re-joining member read its round's counts (one request), then added
// itself to the next round (another). The check rides on the add: the
// transaction's compares, and where one fails, its reads instead.
TEST_CASE("etcd store: add_if_unchanged is one transaction whose compares are the check") {
  const std::string counter = "/p/r1/count";
  bool holds = true;
  SECTION("nothing changed: the add's count") {}
  SECTION("a spare waits: nothing written, the keys read") { holds = false; }
  std::string body;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/kv/txn") return EtcdMember::answer(404, "Not Found");
    body = r.body;
    if (holds)
      return EtcdMember::ok("{" + kAddHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},{"response_range":{"kvs":[)" +
                            kv(counter, 11, 2) + R"(],"count":"1"}},{"response_put":{}},{"response_txn":{"succeeded":true}}]})");
    const auto value = [](const std::string& key, const std::string& v) {
      return R"({"response_range":{"kvs":[{"key":")" + etcd::base64_encode(key) + R"(","version":"1","value":")" +
             etcd::base64_encode(v) + R"("}],"count":"1"}})";
    };
    return EtcdMember::ok("{" + kAddHeader + R"(,"succeeded":false,"responses":[{"response_range":{}},)" +
                          R"({"response_range":{"kvs":[)" + kv("/p/r0/count", 3, 4) + R"(],"count":"1"}},)" +
                          R"({"response_range":{}},)" + value("/p/config", "3:3|train") + "," + value("/p/round", "1") +
                          "]}");
  });
  rendezvous::EtcdStore store(add_settings_for(member), 5s);
  const store::StoreClient::Unchanged unchanged{"r0/count", 3, {{"r0/out", std::nullopt}, {"config", "3:3|train"}}, {"round"}};
  const auto got = store.add_if_unchanged("r1/count", {"round", "0", "1"}, unchanged);
  CHECK(member.count("/v3/kv/txn") == 1);
  CHECK(member.requests().size() == 1);
  const auto json = nlohmann::json::parse(body);
  // The add's marker, the counter's version, out's absence, the config's value.
  REQUIRE(json["compare"].size() == 4);
  CHECK(json["compare"][1].value("target", "VERSION") == "VERSION");  // proto3 JSON leaves the 0 out
  CHECK(json["compare"][1]["key"] == etcd::base64_encode("/p/r0/count"));
  CHECK(json["compare"][1]["version"] == "3");
  CHECK(json["compare"][2]["target"] == "CREATE");
  CHECK(json["compare"][2]["key"] == etcd::base64_encode("/p/r0/out"));
  CHECK(json["compare"][3]["target"] == "VALUE");
  CHECK(json["compare"][3]["value"] == etcd::base64_encode("3:3|train"));
  CHECK(json["failure"].size() == 5);  // the marker, the counter, out, config, round
  if (holds) {
    CHECK(got.count == 2);
  } else {
    CHECK_FALSE(got.count);
    CHECK(got.read.count == 4);  // one waits beyond the round's 3
    REQUIRE(got.read.values.size() == 3);
    CHECK_FALSE(got.read.values[0]);
    CHECK(got.read.values[1] == "3:3|train");
    CHECK(got.read.values[2] == "1");
  }
}
