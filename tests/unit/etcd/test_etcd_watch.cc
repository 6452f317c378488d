// etcd::Watch (etcd/watch.h) against a fake member: how long a broken
// stream is made again.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "etcd/base64.h"
#include "etcd/endpoints.h"
#include "etcd/errors.h"
#include "etcd/options.h"
#include "etcd/watch.h"
#include "fake_etcd_member.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using Member = FakeEtcdMember;

// 10,000 agents re-joining through one etcd: an election left the cluster
// without a leader for longer than what was left of a wait's first slice,
// and every agent whose kept watch broke then failed its join.
TEST_CASE("etcd watch: a broken stream is made again for the time set, not the creation's") {
  const std::string key = "/p/r1/complete";
  const std::string created = R"({"result":{"header":{"revision":"5"},"created":true}})";
  const auto broke = std::chrono::steady_clock::now() + 100ms;
  int watches = 0;
  Member member([&](const Member::Request& r) -> std::string {
    if (r.target != "/v3/watch") return Member::answer(404, "Not Found");
    if (watches++ == 0) return Member::kCloseAfter + Member::stream({created});
    if (std::chrono::steady_clock::now() < broke + 600ms)  // an election: no leader for 600 ms
      return Member::answer(503, R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})");
    return Member::stream({created, R"({"result":{"header":{"revision":"7"},"events":[{"kv":{"key":")" +
                                etcd::base64_encode(key) + R"(","value":")" + etcd::base64_encode("2|1") +
                                R"(","mod_revision":"7"}}]}})"});
  });
  etcd::Options options;
  options.endpoints = etcd::parse_endpoints({member.endpoint()}, etcd::Protocol::http);
  options.timeout = 200ms;  // what was left of the first wait
  etcd::Watch watch(options, key, etcd::Watch::Scope::key, 6);
  bool patient = true;
  SECTION("set to the caller's patience") { watch.set_timeout(5s); }
  SECTION("left at the creation's") { patient = false; }
  if (patient) {
    auto events = watch.next(3s);
    REQUIRE(events);
    CHECK(events->front().kv.value == "2|1");
  } else {
    CHECK_THROWS_AS(watch.next(3s), etcd::EtcdError);
  }
}
