// EtcdLiveness (rendezvous/etcd_liveness.h) against a fake member: how a
// node learns, by its watch, that another's lease expired, when the watch's
// stream breaks on the way.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "etcd/base64.h"
#include "etcd/client.h"
#include "fake_etcd_member.h"
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/etcd_liveness.h"
#include "rendezvous/etcd_store.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using EtcdMember = FakeEtcdMember;

namespace {

rendezvous::RendezvousSettings settings_for(const EtcdMember& m) {
  rendezvous::RendezvousSettings s;
  s.etcd.endpoints = rendezvous::parse_etcd_endpoints({m.endpoint()}, false);
  s.keep_alive_interval = 1s;
  s.read_timeout = 5s;
  return s;
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
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/watch") return EtcdMember::answer(404, "Not Found");
    const std::string created = R"({"result":{"header":{"revision":"5"},"created":true}})";
    if (watches++ == 0) return EtcdMember::kCloseAfter + EtcdMember::stream({created});  // the first member "fails"
    std::this_thread::sleep_for(50ms);
    return EtcdMember::stream({created, R"({"result":{"header":{"revision":"7"},"events":[{"type":"DELETE","kv":{"key":")" +
                                etcd::base64_encode(key) + R"(","mod_revision":"7"}}]}})"});
  });
  const auto settings = settings_for(member);
  etcd::Client client(rendezvous::etcd_options(settings.etcd, 1s));
  rendezvous::EtcdLiveness liveness(settings, client, "/p");
  liveness.joined("/alive/", 3, "5");
  std::vector<int> dead;
  for (int i = 0; i < 100 && dead.empty(); ++i) {  // at most about 1 s of checks: 10 ms apart
    dead = liveness.dead_slots();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(dead == std::vector<int>{1});
}


// Each of 10,000 agents re-joining opened a new connection for the next
// round's watch, and the members spent a large share of the recovery
// accepting them (bench/RESULTS.md): the next round's watch is a new stream
// on the last one's connection.
TEST_CASE("etcd liveness: the next round's watch rides the last round's connection") {
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/watch") return EtcdMember::answer(404, "Not Found");
    return EtcdMember::stream({R"({"result":{"header":{"revision":"5"},"created":true}})"});
  });
  const auto settings = settings_for(member);
  etcd::Client client(rendezvous::etcd_options(settings.etcd, 1s));
  rendezvous::EtcdLiveness liveness(settings, client, "/p");
  liveness.joined("/r0/alive/", 3, "5");
  CHECK(liveness.dead_slots().empty());
  liveness.stop_watching();  // what joining the next round does first
  liveness.joined("/r1/alive/", 3, "6");
  CHECK(member.count("/v3/watch") == 2);
  CHECK(member.connections() == 1);
  // Only the new round's stream is open, and its DELETE is seen.
  const std::string gone = R"({"result":{"header":{"revision":"8"},"events":[{"type":"DELETE","kv":{"key":")" +
                           etcd::base64_encode("/p/r1/alive/0000000002") + R"(","mod_revision":"8"}}]}})";
  int took = 0;
  for (int i = 0; i < 500 && (took = member.push(gone)) != 1; ++i) std::this_thread::sleep_for(10ms);
  CHECK(took == 1);
  std::vector<int> dead;
  for (int i = 0; i < 100 && dead.empty(); ++i) {
    dead = liveness.dead_slots();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(dead == std::vector<int>{2});
}
