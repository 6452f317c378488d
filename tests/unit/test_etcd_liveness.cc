// EtcdLiveness (rendezvous/etcd_liveness.h) against a fake member: how a
// node learns, by its watch, that another's lease expired, when the watch's
// stream breaks on the way.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "etcd/base64.h"
#include "etcd/endpoints.h"
#include "fake_etcd_member.h"
#include "rendezvous/etcd_job_store.h"
#include "rendezvous/etcd_liveness.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using Member = FakeEtcdMember;

namespace {

rendezvous::RendezvousSettings settings_for(const Member& m) {
  rendezvous::RendezvousSettings s;
  s.etcd.endpoints = etcd::parse_endpoints({m.endpoint()}, etcd::Protocol::http);
  s.keep_alive_interval = 1s;
  s.read_timeout = 5s;
  return s;
}

// A watch's stream as the gateway sends it: chunked, and open.
std::string stream(const std::vector<std::string>& messages) {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const auto& m : messages) {
    char size[16];
    snprintf(size, sizeof size, "%zx", m.size());
    out += size + std::string("\r\n") + m + "\r\n";
  }
  return out;
}

}  // namespace

// The member holding the watch fails; the next one answers, but no faster
// than a loaded machine does (here 50 ms to create a watch). The check
// reads what arrived with a moment's deadline (2 ms); re-creating the
// stream inside that moment never finished, and a DELETE was seen only once
// the watch's own timeout ran out (read_timeout: a minute by default).
TEST_CASE("etcd liveness: a broken watch is made again with a call's time, not a check's moment") {
  const std::string prefix = "/p/alive/";
  const std::string key = prefix + "0000000001";
  int watches = 0;
  Member member([&](const Member::Request& r) -> std::string {
    if (r.target != "/v3/watch") return Member::answer(404, "Not Found");
    const std::string created = R"({"result":{"header":{"revision":"5"},"created":true}})";
    if (watches++ == 0) return Member::kCloseAfter + stream({created});  // the first member "fails"
    std::this_thread::sleep_for(50ms);
    return stream({created, R"({"result":{"header":{"revision":"7"},"events":[{"type":"DELETE","kv":{"key":")" +
                                etcd::base64_encode(key) + R"(","mod_revision":"7"}}]}})"});
  });
  rendezvous::EtcdLiveness liveness(settings_for(member), "/p");
  liveness.joined("/alive/", 3, "5");
  std::vector<int> dead;
  for (int i = 0; i < 100 && dead.empty(); ++i) {  // at most about 1 s of checks: 10 ms apart
    dead = liveness.dead_slots();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(dead == std::vector<int>{1});
}

// Every node began with the first member listed: one member served the
// whole job while the others idled.
TEST_CASE("etcd rendezvous: nodes spread over the members, each keeping the order round the list") {
  rendezvous::RendezvousSettings s;
  s.etcd.endpoints = etcd::parse_endpoints({"10.9.0.1:2379", "10.9.0.2:2379", "10.9.0.3:2379"}, etcd::Protocol::http);
  std::map<std::string, int> first;
  for (int node = 0; node < 300; ++node) {
    s.local_addr = "10.0." + std::to_string(node / 250) + "." + std::to_string(node % 250 + 1);
    const auto mine = rendezvous::starting_member_of_this_node(s).etcd.endpoints;
    REQUIRE(mine.size() == 3);
    ++first[mine[0].text()];
    // The same node picks the same member each time.
    CHECK(rendezvous::starting_member_of_this_node(s).etcd.endpoints[0].text() == mine[0].text());
    // Failover goes on round the list from there.
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 3; ++j)
        if (mine[i].text() == s.etcd.endpoints[j].text()) CHECK(mine[(i + 1) % 3].text() == s.etcd.endpoints[(j + 1) % 3].text());
  }
  CHECK(first.size() == 3);
  // About 100 each; under 60 is five standard deviations off (the pid is in the hash).
  for (const auto& [member, nodes] : first) CHECK(nodes >= 60);
  s.etcd.endpoints.resize(1);
  CHECK(rendezvous::starting_member_of_this_node(s).etcd.endpoints.size() == 1);
}
