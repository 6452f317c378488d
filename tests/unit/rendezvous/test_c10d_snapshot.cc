// How the assigner's liveness snapshot reaches every member of a round
// (C10dRendezvous::publish_assignments and assign), with a MemberLiveness
// that only records what it is handed.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "c10d_nodes.h"
#include "fake_store.h"
#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/round_records.h"

using namespace cxxrun::rendezvous;
using namespace c10d_nodes;
using namespace std::chrono_literals;

namespace {

// The store's join writes each member's descriptor (StoreClient::join).
struct RecordingLiveness : MemberLiveness {
  explicit RecordingLiveness(std::string snapshot) : taken(std::move(snapshot)) {}
  bool joining(const std::string&, cxxrun::store::StoreClient::Join&) override { return true; }
  void took(const std::string&) override {}
  void spare() override {}
  std::string snapshot(const std::string&, const std::string&, int) override { return taken; }
  void joined(const std::string&, const std::string&, int, const std::string& snapshot) override { handed = snapshot; }
  void beat() override {}
  std::vector<int> dead_slots() override { return {}; }
  int count_alive(const std::string&, int members) override { return members; }
  std::string taken;
  std::string handed;
};

// Every member of a round of `nodes` is handed `snapshot`; returns the
// longest assignment value written.
size_t round_with_snapshot(int nodes, const std::string& snapshot) {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> members;
  std::vector<std::unique_ptr<RecordingLiveness>> liveness;
  for (int i = 0; i < nodes; ++i) {
    members.push_back(std::make_unique<Node>(store, "10.0.0." + std::to_string(i + 1), settings(nodes, nodes)));
    liveness.push_back(std::make_unique<RecordingLiveness>(snapshot));
    members.back()->rdzv.use_liveness(*liveness.back());
  }
  join_all(members);
  for (const auto& l : liveness) CHECK(l->handed == snapshot);
  size_t longest = 0;
  FakeStore::Client reader(store, "10.0.0.100");
  for (int slot = 0; slot < nodes; ++slot)
    longest = std::max(longest, reader.get("cxxrun/rdzv/job/r0/assign/" + std::to_string(slot), 1s).size());
  return longest;
}

}  // namespace

TEST_CASE("rendezvous: a short liveness snapshot goes with every assignment") {
  CHECK(round_with_snapshot(4, "12345") < 64);
}

// Copied into each of N assignments, a list of the members gone made the
// round's writes N times its size: over etcd, with 3,000 agents and most
// leases expired, "request is too large" and no round.
TEST_CASE("rendezvous: a long liveness snapshot is written once, not into every assignment") {
  std::string snapshot = "777:";
  for (int slot = 0; slot < 2000; ++slot) snapshot += (slot ? "," : "") + std::to_string(slot);
  CHECK(round_with_snapshot(4, snapshot) < 64);
}

TEST_CASE("rendezvous: an assignment record reads back as written, and a malformed one is one clear error") {
  const AssignmentRecord a{3, 24, 64, "912:1,5", {}};
  const AssignmentRecord b = parse_assignment(describe(a));
  CHECK(b.group_rank == 3);
  CHECK(b.base_rank == 24);
  CHECK(b.world_size == 64);
  CHECK(b.alive == "912:1,5");
  CHECK(parse_assignment("0|0|8|").alive.empty());
  CHECK(b.member_addrs.empty());
  const AssignmentRecord zero = parse_assignment(describe(AssignmentRecord{0, 0, 64, "912", {"10.0.0.1", "::1", "n2"}}));
  CHECK(zero.alive == "912");
  CHECK(zero.member_addrs == std::vector<std::string>{"10.0.0.1", "::1", "n2"});
  CHECK_THROWS_WITH(parse_assignment("0|0|8|912|10.0.0.1,,n2"),
                    "malformed assignment in the rendezvous store: an empty address in '0|0|8|912|10.0.0.1,,n2'");
  CHECK_THROWS_WITH(parse_assignment("0|0"), "malformed assignment in the rendezvous store: '0|0'");
  CHECK_THROWS_AS(parse_assignment("x|0|8|"), RendezvousError);
}

TEST_CASE("rendezvous: a round's completion record reads back as written, and a malformed one is one clear error") {
  CHECK(describe(RoundCompletionRecord{8, 7}) == "8|7");
  const RoundCompletionRecord c = parse_completion("8|7");
  CHECK(c.members == 8);
  CHECK(c.assigner == 7);
  CHECK_THROWS_WITH(parse_completion("8"), "malformed round completion in the rendezvous store: '8'");
  CHECK_THROWS_AS(parse_completion("x|7"), RendezvousError);
}

// The assigner takes seconds with 1,000 nodes over etcd. A member waiting
// for its assignment without renewing its lease lost its alive key after
// the TTL: the snapshot counted it dead, and each DELETE went to every
// member's watch.
TEST_CASE("rendezvous: a member waiting for its assignment renews its lease while the assigner works") {
  struct SlowAssigner : MemberLiveness {
    std::atomic<bool>* assigning;
    std::atomic<int> beats_meanwhile{0};
    explicit SlowAssigner(std::atomic<bool>* flag) : assigning(flag) {}
    bool joining(const std::string&, cxxrun::store::StoreClient::Join&) override { return true; }
    void took(const std::string&) override {}
    void spare() override {}
    std::string snapshot(const std::string&, const std::string&, int) override {
      *assigning = true;
      std::this_thread::sleep_for(700ms);  // several keep-alive intervals
      *assigning = false;
      return "5";
    }
    void joined(const std::string&, const std::string&, int, const std::string&) override {}
    void beat() override {
      if (*assigning) ++beats_meanwhile;
    }
    std::vector<int> dead_slots() override { return {}; }
    int count_alive(const std::string&, int members) override { return members; }
  };
  std::atomic<bool> assigning{false};
  FakeStore store;
  std::vector<std::unique_ptr<Node>> members;
  std::vector<std::unique_ptr<SlowAssigner>> liveness;
  for (int i = 0; i < 2; ++i) {
    auto s = settings(2, 2);
    s.keep_alive_interval = 100ms;
    members.push_back(std::make_unique<Node>(store, "10.0.0." + std::to_string(i + 1), s));
    liveness.push_back(std::make_unique<SlowAssigner>(&assigning));
    members.back()->rdzv.use_liveness(*liveness.back());
  }
  join_all(members);
  // The member that did not assign beat about every 100 ms of the 700.
  CHECK(liveness[0]->beats_meanwhile + liveness[1]->beats_meanwhile >= 3);
}
