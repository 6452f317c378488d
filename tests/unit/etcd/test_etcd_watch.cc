// etcd::Watch (etcd/watch.h) against a fake member: how long a broken
// stream is made again, and which connection a restarted watch uses.
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

namespace {

const std::string kCreated = R"({"result":{"header":{"revision":"5"},"created":true}})";

std::string put_event(const std::string& key, int revision) {
  return R"({"result":{"header":{"revision":")" + std::to_string(revision) + R"("},"events":[{"kv":{"key":")" +
         etcd::base64_encode(key) + R"(","value":")" + etcd::base64_encode("1") + R"(","mod_revision":")" +
         std::to_string(revision) + R"("}}]}})";
}

}  // namespace

TEST_CASE("etcd watch: restart() is a new stream on the same connection, and the old stream ends") {
  Member member([&](const Member::Request& r) -> std::string {
    if (r.target != "/v3/watch") return Member::answer(404, "Not Found");
    return Member::stream({kCreated});
  });
  etcd::Options options;
  options.endpoints = etcd::parse_endpoints({member.endpoint()}, etcd::Protocol::http);
  options.timeout = 5s;
  etcd::Watch watch(options, "/p/r0/", etcd::Watch::Scope::prefix, 6);
  watch.stop();
  watch.restart("/p/r1/", etcd::Watch::Scope::prefix, 9, 5s);
  CHECK(member.connections() == 1);
  const auto requests = member.requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[1].body.find(etcd::base64_encode("/p/r1/")) != std::string::npos);
  CHECK(requests[1].body.find("\"start_revision\":\"9\"") != std::string::npos);
  // The member sees the first stream cancelled: one stream takes a push.
  int took = 0;
  for (int i = 0; i < 500 && (took = member.push(put_event("/p/r1/a", 9))) != 1; ++i) std::this_thread::sleep_for(10ms);
  CHECK(took == 1);
  auto events = watch.next(3s);
  REQUIRE(events);
  CHECK(events->front().kv.key == "/p/r1/a");
  CHECK(watch.revision() == 9);
}

TEST_CASE("etcd watch: restart() after the member closed the connection makes a new one") {
  int watches = 0;
  Member member([&](const Member::Request& r) -> std::string {
    if (r.target != "/v3/watch") return Member::answer(404, "Not Found");
    if (watches++ == 0) return Member::kCloseAfter + Member::stream({kCreated});
    return Member::stream({kCreated});
  });
  etcd::Options options;
  options.endpoints = etcd::parse_endpoints({member.endpoint()}, etcd::Protocol::http);
  options.timeout = 5s;
  etcd::Watch watch(options, "/p/r0/", etcd::Watch::Scope::prefix, 6);
  std::this_thread::sleep_for(50ms);  // the close arrives
  watch.restart("/p/r1/", etcd::Watch::Scope::prefix, 9, 5s);
  CHECK(member.connections() == 2);
  CHECK(member.count("/v3/watch") == 2);
  CHECK(member.push(put_event("/p/r1/b", 10)) == 1);
  auto events = watch.next(3s);
  REQUIRE(events);
  CHECK(events->front().kv.key == "/p/r1/b");
}
