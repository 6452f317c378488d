// EtcdStore::add (rendezvous/etcd_store.h) against a fake member that
// times its first proposal out, as an overloaded etcd does: the add is sent
// again and counts once.
#include <catch2/catch.hpp>
#include <chrono>

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
