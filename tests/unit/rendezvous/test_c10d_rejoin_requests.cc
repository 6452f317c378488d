// How many store requests one failure costs a job that re-forms over a
// TCPStore: the store answers every request of every agent on one thread,
// so at 10,000 agents the recovery's time is this count (bench/RESULTS.md,
// "Fewer requests per re-join").
#include <atomic>
#include <optional>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <utility>

#include "c10d_nodes.h"

using namespace c10d_nodes;

namespace {

// Counts the requests a real client would send for each call that
// succeeded, as the wire carries them: a GET is WAIT then GET, a MULTI_GET
// WAIT then MULTI_GET, get_if_set one COMPARE_SET that writes nothing
// (store/client.cc, kNeverStored). A wait slice that
// times out is left out: how many pass is the clock's, not the algorithm's.
// Also counts round trips: the requests whose answer the caller waits for
// before it sends another (a SET, APPEND or MULTI_SET goes without waiting;
// get_if_set is one COMPARE_SET, as the TCPStore client makes it; a batch,
// compare_sets, get_if_set_each or add_and_get_if_set_each, is one write
// and one round trip, its requests one each).
class CountingClient : public FakeStore::Client {
 public:
  CountingClient(FakeStore& store, std::string addr, std::atomic<int>& count, std::atomic<int>* trips = nullptr)
      : FakeStore::Client(store, std::move(addr)), count_(count), trips_(trips) {}
  void set(const std::string& k, const std::string& v) override { Client::set(k, v), tally(1); }
  std::string get(const std::string& k, Duration t) override {
    auto v = Client::get(k, t);  // its WAIT is counted by wait()
    tally(1, 1);
    return v;
  }
  int64_t add(const std::string& k, int64_t d) override {
    auto n = Client::add(k, d);
    tally(1, 1);
    return n;
  }
  std::string compare_set(const std::string& k, const std::string& e, const std::string& d) override {
    auto v = Client::compare_set(k, e, d);
    tally(1, 1);
    return v;
  }
  bool check(const std::vector<std::string>& keys) override {
    auto ok = Client::check(keys);
    tally(1, 1);
    return ok;
  }
  std::optional<std::string> get_if_set(const std::string& k) override {
    const bool was = std::exchange(inner_, true);
    auto v = Client::get_if_set(k);  // the TCPStore client's one COMPARE_SET
    inner_ = was;
    tally(1, 1);
    return v;
  }
  void wait(const std::vector<std::string>& keys, Duration t) override { Client::wait(keys, t), tally(1, 1); }
  void append(const std::string& k, const std::string& v) override { Client::append(k, v), tally(1); }
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    const bool was = std::exchange(inner_, true);
    auto v = Client::multi_get(keys);
    inner_ = was;
    tally(2, 2);
    return v;
  }
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override {
    const bool was = std::exchange(inner_, true);
    Client::multi_set(keys, values);
    inner_ = was;
    tally(1);
  }
  std::vector<std::string> compare_sets(const std::vector<CompareSet>& each) override {
    const bool was = std::exchange(inner_, true);
    auto v = Client::compare_sets(each);
    inner_ = was;
    tally(static_cast<int>(each.size()), 1);
    return v;
  }
  int64_t add_and_compare_set(const std::string& counter, const CompareSet& also) override {
    const bool was = std::exchange(inner_, true);
    auto n = Client::add_and_compare_set(counter, also);
    inner_ = was;
    tally(2, 1);  // an ADD and a COMPARE_SET, written together
    return n;
  }
  CountAndValues add_and_get_if_set_each(const std::string& counter, int64_t delta,
                                         const std::vector<std::string>& keys) override {
    const bool was = std::exchange(inner_, true);
    auto v = Client::add_and_get_if_set_each(counter, delta, keys);
    inner_ = was;
    tally(1 + static_cast<int>(keys.size()), 1);  // an ADD and a COMPARE_SET a key, written together
    return v;
  }
  std::vector<std::optional<std::string>> get_if_set_each(const std::vector<std::string>& keys) override {
    const bool was = std::exchange(inner_, true);
    auto v = Client::get_if_set_each(keys);
    inner_ = was;
    tally(static_cast<int>(keys.size()), 1);  // one COMPARE_SET a key, written together
    return v;
  }

 private:
  void tally(int n, int trips = 0) {
    if (inner_) return;
    count_ += n;
    trip(trips);
  }
  void trip(int n) {
    if (trips_ && !inner_) *trips_ += n;
  }
  std::atomic<int>& count_;
  std::atomic<int>* trips_;
  bool inner_ = false;
};

class CountingStateStore : public StateStore {
 public:
  CountingStateStore(FakeStore& store, std::string addr, std::atomic<int>& count, std::atomic<int>* trips = nullptr)
      : store_(store), addr_(addr), count_(count), trips_(trips), client_(store, std::move(addr), count, trips) {}
  cxxrun::store::StoreClient& client() override { return client_; }
  std::unique_ptr<cxxrun::store::StoreClient> connect_another(std::chrono::milliseconds) const override {
    return std::make_unique<CountingClient>(store_, addr_, count_, trips_);
  }
  void leave(bool, int, const std::function<void()>& first) override { first(); }

 private:
  FakeStore& store_;
  const std::string addr_;
  std::atomic<int>& count_;
  std::atomic<int>* trips_;
  CountingClient client_;
};

}  // namespace

namespace {

struct Cost {
  int requests = 0;
  int round_trips = 0;
};

// One failure in a 3-node job and its re-join through C10dBackend: what the
// store saw from the failure on.
Cost one_failure_and_rejoin() {
  FakeStore store;
  std::atomic<int> requests{0};
  std::atomic<int> trips{0};
  std::atomic<int> woken{0};
  RendezvousConfig config;
  config.backend = Backend::c10d;
  config.settings = settings(3, 3);
  std::vector<std::unique_ptr<C10dBackend>> nodes;
  for (const char* addr : {"127.0.0.1", "127.0.0.2", "127.0.0.3"}) {
    config.settings.local_addr = addr;
    nodes.push_back(std::make_unique<C10dBackend>(config, WorkerStorePlan{}, [&, addr](const RendezvousConfig&) {
      return std::make_unique<CountingStateStore>(store, addr, requests, &trips);
    }));
  }
  std::vector<std::future<Assignment>> joins;
  for (auto& n : nodes) joins.push_back(std::async(std::launch::async, [&n] { return n->join(); }));
  for (auto& j : joins) REQUIRE(j.get().round == 0);
  for (auto& n : nodes)
    n->watch([&](int round, RoundEvent what) {
      if (round == 0 && what == RoundEvent::abort) ++woken;
    });

  requests = 0;
  trips = 0;
  nodes[1]->publish_failure("rank 3 exited with 1");  // APPEND and COMPARE_SET: 2
  for (int i = 0; i < 1000 && woken < 3; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(woken == 3);
  std::vector<std::future<Assignment>> rejoins;
  for (auto& n : nodes) rejoins.push_back(std::async(std::launch::async, [&n] { return n->rejoin(); }));
  std::set<int> ranks;
  for (auto& r : rejoins) {
    const Assignment a = r.get();
    CHECK(a.round == 1);
    CHECK(a.group_world_size == 3);
    CHECK(a.master_addr == "127.0.0.1");
    ranks.insert(a.group_rank);
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  return {requests.load(), trips.load()};
}

}  // namespace

TEST_CASE("rendezvous: one failure costs a 3-node job at most 50 store requests to re-form") {
  // Each node: the watcher's one wait-and-read of the event (2); the re-join
  // takes the event from it, the round from start_next_round's answer and
  // the step-outs from its own read, and writes no `next` for spares when
  // none waits (6); the wait for the round's completion
  // (2, the completer's COMPARE_SET and wake key instead), the wait for
  // the round's `assigned` and a read of its assignment, and the master
  // (4; group rank 0, which writes it, 3: its assignment brings the
  // members' addresses, which it read with a MULTI_GET of 2 more), and the assigner's read of every descriptor and write of
  // every assignment (4). The re-join's read takes the round number and
  // the config with the counts, and a node that found the round not yet
  // opened sends the COMPARE_SET that opens it with its join's ADD: as
  // many requests as when each node sent its COMPARE_SETs alone (47), and
  // one more for each node that found the round opened by another's ADD
  // before its own went (up to 50), but a round trip fewer for every
  // node (below). It was 71: the watcher read the event twice, the
  // re-join once more, the join asked for the round and the step-outs
  // again, every member wrote `next`, and group rank 0 read back the master
  // it wrote.
  const Cost cost = one_failure_and_rejoin();
  INFO("store requests for one failure and the re-join of 3 nodes: " << cost.requests);
  CHECK(cost.requests <= 50);
}

TEST_CASE("rendezvous: a re-joining node reads the counts and the round in one round trip, and opens it with its join") {
  // The waiting count, the step-outs, the round number and the config are
  // read together, and the round is opened with the join's ADD: 1 round
  // trip before the join where they were 4 (ADD, a read of the step-outs,
  // COMPARE_SET round, COMPARE_SET config), then 2, so 33 for the failure
  // and 3 re-joins where it was 42, then 36. At 10,000 agents the store's
  // cost is its round trips (bench/RESULTS.md, issue 45).
  const Cost cost = one_failure_and_rejoin();
  INFO("round trips to the store for one failure and the re-join of 3 nodes: " << cost.round_trips);
  CHECK(cost.round_trips <= 33);
}

TEST_CASE("rendezvous: a spare that came after the members read no node waiting joins the next round") {
  // The members re-form without writing `next` (start_next_round(false):
  // each read the waiting count before the spare counted itself in); the
  // spare, waiting on round 0's `next`, finds the round number moved.
  FakeStore store;
  auto s = settings(2, 2);
  s.keep_alive_interval = 50ms;  // the spare's wait slice
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, s));
  join_all(nodes);
  std::atomic<bool> beating{true};
  std::thread beats([&] {  // a lives on, so the spare does not open the next round itself
    while (beating) {
      nodes[0]->rdzv.keep_alive();
      std::this_thread::sleep_for(10ms);
    }
  });
  Node spare(store, "c", s);
  auto spare_result = std::async(std::launch::async, [&] { return spare.rdzv.next_rendezvous(); });
  for (int i = 0; i < 500 && nodes[0]->rdzv.num_nodes_waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(nodes[0]->rdzv.num_nodes_waiting() == 1);
  nodes[0]->rdzv.start_next_round(false);
  // b died: a re-forms expecting the spare, which must come to round 1.
  auto a_result = std::async(std::launch::async, [&] { return nodes[0]->rdzv.next_rendezvous(2); });
  const bool formed = a_result.wait_for(5s) == std::future_status::ready &&
                      spare_result.wait_for(5s) == std::future_status::ready;
  beating = false;
  beats.join();
  if (!formed) nodes[1]->rdzv.close(false);  // releases them, so the test fails rather than hangs
  REQUIRE(formed);
  CHECK(a_result.get().group_world_size == 2);
  CHECK(spare_result.get().round == 1);
}

// Over etcd each of N re-joining agents' COMPARE_SETs was a request of its
// own (a read, then a transaction through Raft for every one that read the
// round not yet opened: most, as they wake at once). The round number and
// the config now come with the counts, and the round is opened by the
// first join's ADD, which carries the COMPARE_SET.
TEST_CASE("rendezvous: a re-joining member reads once before its join, which opens the round") {
  FakeStore store;
  std::atomic<int> requests{0}, trips{0};
  const auto s = settings(2, 2);
  CountingClient ca(store, "a", requests, &trips), cb(store, "b", requests, &trips);
  const auto port = [](const std::vector<std::string>&) { return 1000; };
  const auto quiet = [](const std::string&) {};
  C10dRendezvous a(ca, s, port, quiet), b(cb, s, port, quiet);
  auto ja = std::async(std::launch::async, [&] { return a.next_rendezvous(); });
  auto jb = std::async(std::launch::async, [&] { return b.next_rendezvous(); });
  REQUIRE(ja.get().round == 0);
  REQUIRE(jb.get().round == 0);
  a.outcome().publish_event(RoundEvent::abort);
  a.waiting_and_stepped_out();
  a.start_next_round(false);
  requests = 0;
  trips = 0;
  CHECK(b.waiting_and_stepped_out().waiting == 0);
  b.start_next_round(false);
  CHECK(trips == 1);
  CHECK(requests == 4);  // the count, the step-outs, the round number, the config: no COMPARE_SET
  auto ra = std::async(std::launch::async, [&] { return a.next_rendezvous(2); });
  auto rb = std::async(std::launch::async, [&] { return b.next_rendezvous(2); });
  CHECK(ra.get().round == 1);
  CHECK(rb.get().round == 1);
  CHECK(cb.get("cxxrun/rdzv/job/round", 1s) == "1");  // opened, for nodes that join later
}

namespace {

// Two members of round 0, its event published: what a re-join starts from.
struct Pair {
  FakeStore store;
  std::atomic<int> requests{0}, trips{0};
  RendezvousSettings s = settings(2, 2);
  CountingClient ca{store, "a", requests, &trips}, cb{store, "b", requests, &trips};
  C10dRendezvous a{ca, s, port(), quiet()}, b{cb, s, port(), quiet()};
  static C10dRendezvous::PickPort port() {
    return [](const std::vector<std::string>&) { return 1000; };
  }
  static C10dRendezvous::Log quiet() {
    return [](const std::string&) {};
  }
  Pair() {
    auto ja = std::async(std::launch::async, [&] { return a.next_rendezvous(); });
    auto jb = std::async(std::launch::async, [&] { return b.next_rendezvous(); });
    REQUIRE(ja.get().round == 0);
    REQUIRE(jb.get().round == 0);
    a.outcome().publish_event(RoundEvent::abort);
  }
};

}  // namespace

TEST_CASE("rendezvous: members whose round changed only by a failure re-join with the check on their ADD") {
  Pair p;
  auto ra = std::async(std::launch::async, [&] { return p.a.rejoin_if_unchanged(2); });
  auto rb = std::async(std::launch::async, [&] { return p.b.rejoin_if_unchanged(2); });
  const auto a = ra.get(), b = rb.get();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->round == 1);
  CHECK(b->round == 1);
  CHECK(a->group_world_size == 2);
  CHECK(a->group_rank != b->group_rank);
  CHECK(p.ca.get("cxxrun/rdzv/job/round", 1s) == "1");  // opened, for nodes that join later
}

// A spare waiting, or a member stepped out: the re-join must count them
// (C10dBackend::rejoin), so the check writes nothing, and what it read
// serves the re-join's read.
TEST_CASE("rendezvous: a re-join whose check finds something changed writes nothing, and its read is the re-join's") {
  Pair p;
  int waiting = 0, out = 0;
  std::future<Assignment> spare_result;
  std::optional<Node> spare;
  SECTION("a member stepped out") {
    p.b.step_out();
    out = 1;
  }
  SECTION("a spare waits") {
    spare.emplace(p.store, "c", p.s);
    spare_result = std::async(std::launch::async, [&] { return spare->rdzv.next_rendezvous(); });
    for (int i = 0; i < 500 && p.a.num_nodes_waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
    waiting = 1;
  }
  CHECK_FALSE(p.a.rejoin_if_unchanged(2));
  CHECK(p.ca.add("cxxrun/rdzv/job/r1/count", 0) == 0);  // not joined
  p.requests = 0;
  const auto read = p.a.waiting_and_stepped_out();
  CHECK(p.requests == 0);
  CHECK(read.waiting == waiting);
  CHECK(read.stepped_out == out);
  if (spare) {
    p.a.close(false);  // releases the spare
    CHECK_THROWS(spare_result.get());
  }
}
