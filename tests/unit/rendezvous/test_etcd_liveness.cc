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
  s.etcd.prefix = "/p";
  s.keep_alive_interval = 1s;
  s.read_timeout = 5s;
  return s;
}

// A DELETE of an alive key, with the key as it was: created at `created`.
std::string gone(const std::string& key, int revision, int created) {
  return R"({"result":{"header":{"revision":")" + std::to_string(revision) + R"("},"events":[{"type":"DELETE","kv":{"key":")" +
         etcd::base64_encode(key) + R"(","mod_revision":")" + std::to_string(revision) + R"("},"prev_kv":{"key":")" +
         etcd::base64_encode(key) + R"(","create_revision":")" + std::to_string(created) + R"(","mod_revision":")" +
         std::to_string(created) + R"(","version":"1"}}]}})";
}

// The round's counter as of a join: its version is the joiner's slot + 1.
std::string counter_at(const std::string& key, int version) {
  return EtcdMember::ok(R"({"header":{"revision":"9"},"kvs":[{"key":")" + etcd::base64_encode(key) +
                        R"(","create_revision":"2","mod_revision":"3","version":")" + std::to_string(version) +
                        R"(","value":""}],"count":"1"})");
}

// One key of a range's answer, created (and last written) at `created`.
std::string kv_json(const std::string& key, int created, const std::string& value) {
  return R"({"key":")" + etcd::base64_encode(key) + R"(","create_revision":")" + std::to_string(created) +
         R"(","mod_revision":")" + std::to_string(created) + R"(","version":"1","value":")" +
         etcd::base64_encode(value) + R"("})";
}

// A range's answer holding `kvs` (kv_json's).
std::string range_of(const std::vector<std::string>& kvs) {
  std::string joined;
  for (const auto& kv : kvs) joined += (joined.empty() ? "" : ",") + kv;
  return EtcdMember::ok(R"({"header":{"revision":"9"},"kvs":[)" + joined + R"(],"count":")" +
                        std::to_string(kvs.size()) + R"("})");
}

// A member that answers each range with `range` and creates each watch as
// of revision `at`; nothing else.
EtcdMember::Script watching(EtcdMember::Script range, int at = 5) {
  return [range = std::move(range), at](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/range") return range(r);
    if (r.target != "/v3/watch") return EtcdMember::answer(404, "Not Found");
    return EtcdMember::stream({R"({"result":{"header":{"revision":")" + std::to_string(at) + R"("},"created":true}})"});
  };
}

}  // namespace

// The member holding the watch fails; the next one answers, but no faster
// than a loaded machine does (here 50 ms to create a watch). The check
// reads what arrived with a moment's deadline (2 ms); re-creating the
// stream inside that moment never finished, and a DELETE was seen only once
// the watch's own timeout ran out (read_timeout: a minute by default).
TEST_CASE("etcd liveness: a broken watch is made again with a call's time, not a check's moment") {
  const std::string key = "/p/alive/n1";
  int watches = 0;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/range") return counter_at("/p/count", 2);
    if (r.target != "/v3/watch") return EtcdMember::answer(404, "Not Found");
    const std::string created = R"({"result":{"header":{"revision":"5"},"created":true}})";
    if (watches++ == 0) return EtcdMember::kCloseAfter + EtcdMember::stream({created});  // the first member "fails"
    std::this_thread::sleep_for(50ms);
    return EtcdMember::stream({created, gone(key, 7, 3)});
  });
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.joined("alive/", "count", 3, "5/4");
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
  EtcdMember member(watching([](const EtcdMember::Request&) { return counter_at("/p/r1/count", 3); }));
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.joined("r0/alive/", "r0/count", 3, "5/4");
  CHECK(liveness.dead_slots().empty());
  liveness.stop_watching();  // what joining the next round does first
  liveness.joined("r1/alive/", "r1/count", 3, "6/5");
  CHECK(member.count("/v3/watch") == 2);
  CHECK(member.connections() == 1);
  // Only the new round's stream is open, and its DELETE is seen.
  int took = 0;
  for (int i = 0; i < 500 && (took = member.push(gone("/p/r1/alive/n2", 8, 5))) != 1; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(took == 1);
  std::vector<int> dead;
  for (int i = 0; i < 100 && dead.empty(); ++i) {
    dead = liveness.dead_slots();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(dead == std::vector<int>{2});
}

namespace {

// A PUT of an alive key (a member's lease granted again, and its key put
// back).
std::string back(const std::string& key, int revision) {
  return R"({"result":{"header":{"revision":")" + std::to_string(revision) + R"("},"events":[{"kv":{"key":")" +
         etcd::base64_encode(key) + R"(","create_revision":")" + std::to_string(revision) + R"(","mod_revision":")" +
         std::to_string(revision) + R"(","version":"1"}}]}})";
}

// What the member's watch holds, once pushed; then the checks until `dead`
// is what they say (about a second at most).
std::vector<int> after_push(EtcdMember& member, rendezvous::EtcdLiveness& liveness, const std::string& message,
                            const std::vector<int>& expected) {
  for (int i = 0; i < 500 && member.push(message) != 1; ++i) std::this_thread::sleep_for(10ms);
  std::vector<int> dead;
  for (int i = 0; i < 100; ++i) {
    dead = liveness.dead_slots();
    if (dead == expected) break;
    std::this_thread::sleep_for(10ms);
  }
  return dead;
}

}  // namespace

// A spare's alive key is made with its join, after the round's last member
// joined, and goes when it learns it is a spare (MemberLiveness::spare): no
// member's death, and no read to tell. A member's key goes, the round's
// counter as of its join says its slot; put back, it is alive again.
TEST_CASE("etcd liveness: a spare's key going is no death; a member's is, by its slot, until it is back") {
  int ranges = 0;
  EtcdMember member(watching([&](const EtcdMember::Request&) {
    ++ranges;
    return counter_at("/p/r0/count", 2);
  }));
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.joined("r0/alive/", "r0/count", 3, "5/4");
  CHECK(after_push(member, liveness, gone("/p/r0/alive/spare", 6, 5), {}).empty());
  CHECK(ranges == 0);
  CHECK(after_push(member, liveness, gone("/p/r0/alive/n1", 7, 3), {1}) == std::vector<int>{1});
  CHECK(ranges == 1);
  CHECK(after_push(member, liveness, back("/p/r0/alive/n1", 8), {}).empty());
  CHECK(after_push(member, liveness, gone("/p/r0/alive/n1", 9, 8), {1}) == std::vector<int>{1});
  CHECK(ranges == 1);  // known by its name now
}

// etcd leaves the key as it was out of an event it replays from before a
// compaction; the round's joiners, by their joins' revisions, say the slot.
TEST_CASE("etcd liveness: a DELETE without the key as it was is placed by the round's joiners") {
  // Sorted by key, as etcd answers; joined in another order.
  EtcdMember member(watching([](const EtcdMember::Request&) {
    return range_of({kv_json("/p/r0/count/adds/a", 4, "d-a"), kv_json("/p/r0/count/adds/b", 2, "d-b"),
                     kv_json("/p/r0/count/adds/c", 3, "d-c")});
  }));
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  CHECK(store.joiners("r0/count", "r0/node/", 3, std::nullopt) == std::vector<std::string>{"d-b", "d-c", "d-a"});
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.joined("r0/alive/", "r0/count", 3, "5/4");
  const std::string without_prev = R"({"result":{"header":{"revision":"7"},"events":[{"type":"DELETE","kv":{"key":")" +
                                   etcd::base64_encode("/p/r0/alive/c") + R"(","mod_revision":"7"}}]}})";
  CHECK(after_push(member, liveness, without_prev, {1}) == std::vector<int>{1});
}

// A spare's key goes at once (so that a spare counting the members' keys
// does not count its own), and the count is one small answer.
TEST_CASE("etcd liveness: a spare deletes its alive key; the members' keys are counted") {
  std::vector<std::string> deleted;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/deleterange") {
      deleted.push_back(r.body);
      return EtcdMember::ok(R"({"header":{"revision":"9"},"deleted":"1"})");
    }
    if (r.target == "/v3/kv/range") return EtcdMember::ok(R"({"header":{"revision":"9"},"count":"2"})");
    return EtcdMember::answer(404, "Not Found");
  });
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.took("r0/alive/me");
  liveness.spare();
  REQUIRE(deleted.size() == 1);
  CHECK(deleted[0].find(etcd::base64_encode("/p/r0/alive/me")) != std::string::npos);
  liveness.spare();  // gone already: nothing more
  CHECK(deleted.size() == 1);
  CHECK(liveness.count_alive("r0/alive/", 3) == 2);
}

// Without the assigner's snapshot (or after etcd compacted the watch's
// history), who is alive is read again: the round's joiners and the alive
// keys. One found gone and then put back (its lease granted again) is alive.
TEST_CASE("etcd liveness: read again, a member gone is dead until its key is back") {
  EtcdMember member(watching(
      [](const EtcdMember::Request& r) {
        if (r.body.find(etcd::base64_encode("/p/r0/count/adds/")) != std::string::npos)
          return range_of({kv_json("/p/r0/count/adds/x", 3, "dx"), kv_json("/p/r0/count/adds/y", 2, "dy")});
        // Only y's alive key is left: x (slot 1) is gone.
        return range_of({kv_json("/p/r0/alive/y", 2, "")});
      },
      9));
  const auto settings = settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 1s);
  rendezvous::EtcdLiveness liveness(settings, store);
  liveness.joined("r0/alive/", "r0/count", 2, "");
  CHECK(liveness.dead_slots() == std::vector<int>{1});
  CHECK(after_push(member, liveness, back("/p/r0/alive/x", 10), {}).empty());
}
