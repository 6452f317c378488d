#include <algorithm>
#include <atomic>

#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>

#include "c10d_nodes.h"
#include "fake_store.h"
#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/round_records.h"
#include "store/client.h"
#include "vanishing_store.h"

using namespace cxxrun::rendezvous;
using namespace c10d_nodes;
using namespace std::chrono_literals;

TEST_CASE("rendezvous: fixed size job gets unique ranks and one master") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"10.0.0.3", "10.0.0.1", "10.0.0.2", "10.0.0.4"})
    nodes.push_back(std::make_unique<Node>(store, addr, settings(4, 4)));
  auto result = join_all(nodes);
  std::set<int> group_ranks, base_ranks;
  for (size_t i = 0; i < result.size(); ++i) {
    group_ranks.insert(result[i].group_rank);
    base_ranks.insert(result[i].base_rank);
    CHECK(result[i].world_size == 8);
    CHECK(result[i].group_world_size == 4);
    CHECK(result[i].master_addr == "10.0.0.1");  // the lowest address is group rank 0
    CHECK(result[i].master_port == 1000);
  }
  CHECK(group_ranks == std::set<int>{0, 1, 2, 3});
  CHECK(base_ranks == std::set<int>{0, 2, 4, 6});
  // Ranks follow the sorted addresses, whatever the join order.
  CHECK(result[1].group_rank == 0);
  CHECK(result[2].group_rank == 1);
  CHECK(result[0].group_rank == 2);
  // Group rank 0 learns every member's address, for its workers' store to
  // admit only them; the others are never asked.
  auto seen = nodes[1]->members_seen;
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"});
  CHECK(nodes[0]->members_seen.empty());
}

namespace {

// A member whose client counts its MULTI_GETs: group rank 0 read every
// member's descriptor with one before it could name the master (five pages
// of 2,048 at 10,000 agents over etcd, while every member waited for it).
struct CountingNode {
  struct Client : FakeStore::Client {
    using FakeStore::Client::Client;
    std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
      if (!in_wait_and_get) ++multi_gets;
      return FakeStore::Client::multi_get(keys);
    }
    // The assigner's read of every descriptor (its default is a MULTI_GET).
    std::vector<std::string> wait_and_get(const std::vector<std::string>& keys, Duration timeout) override {
      in_wait_and_get = true;
      auto values = FakeStore::Client::wait_and_get(keys, timeout);
      in_wait_and_get = false;
      return values;
    }
    std::atomic<int> multi_gets{0};
    bool in_wait_and_get = false;
  };
  Client client;
  C10dRendezvous rdzv;
  std::vector<std::string> members_seen;
  CountingNode(FakeStore& store, const std::string& addr, RendezvousSettings s)
      : client(store, addr), rdzv(client, std::move(s),
                                  [this](const std::vector<std::string>& members) {
                                    members_seen = members;
                                    return 1000;
                                  },
                                  [](const std::string&) {}) {}
};

// Each node's assignment and what group rank 0's pick_port was told.
void join_counting(std::vector<std::unique_ptr<CountingNode>>& nodes) {
  std::vector<std::future<Assignment>> futures;
  for (auto& n : nodes) futures.push_back(std::async(std::launch::async, [&n] { return n->rdzv.next_rendezvous(); }));
  for (auto& f : futures) REQUIRE(f.get().master_port == 1000);
}

}  // namespace

TEST_CASE("rendezvous: group rank 0 takes the members' addresses from its assignment") {
  FakeStore store;
  std::vector<std::unique_ptr<CountingNode>> nodes;
  for (const char* addr : {"10.0.0.3", "10.0.0.1", "10.0.0.2"})
    nodes.push_back(std::make_unique<CountingNode>(store, addr, settings(3, 3)));
  join_counting(nodes);
  CountingNode& rank0 = *nodes[1];
  auto seen = rank0.members_seen;
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"});
  CHECK(rank0.client.multi_gets == 0);
  // Only its record carries them.
  FakeStore::Client reader(store, "10.0.0.100");
  int carrying = 0;
  for (int slot = 0; slot < 3; ++slot)
    carrying += !parse_assignment(reader.get("cxxrun/rdzv/job/r0/assign/" + std::to_string(slot), 1s)).member_addrs.empty();
  CHECK(carrying == 1);
}

// Past what one write may carry (etcd refuses a request over 1.5 MiB), the
// addresses stay out of the record and group rank 0 reads them.
TEST_CASE("rendezvous: members whose addresses are too long to carry are read by group rank 0") {
  FakeStore store;
  std::vector<std::unique_ptr<CountingNode>> nodes;
  for (const char* tail : {"a", "b", "c"})
    nodes.push_back(std::make_unique<CountingNode>(store, std::string(200 * 1024, 'h') + tail, settings(3, 3)));
  join_counting(nodes);
  for (auto& n : nodes) {
    if (n->members_seen.empty()) continue;
    CHECK(n->members_seen.size() == 3);
    CHECK(n->client.multi_gets == 1);
  }
}

// The round watcher's connection is told event_prefix() (C10dBackend::watch)
// and over etcd watches what is written under it: told the whole milestone
// prefix, its watch brought every member each round's completion, wake keys,
// assignment and master a second time. Under it: every round's event, alone.
// And not under the milestones: every member's milestone watch was pushed
// each event too, N messages more for every abort.
TEST_CASE("rendezvous: round events live apart from the round's other milestones") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"10.0.0.1", "10.0.0.2"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(nodes);
  auto& rdzv = nodes[0]->rdzv;
  CHECK(rdzv.outcome().publish_event(RoundEvent::abort) == RoundEvent::abort);
  CHECK(nodes[1]->rdzv.outcome().current_event() == RoundEvent::abort);
  const std::string events = rdzv.event_prefix(), milestones = rdzv.milestone_prefix();
  CHECK(events.compare(0, milestones.size(), milestones) != 0);
  CHECK(milestones.compare(0, events.size(), events) != 0);
  CHECK(store.keys_under(events) == std::vector<std::string>{rdzv.outcome().event_key()});
  CHECK(store.keys_under(milestones).size() >= 4);  // wake, complete, assigned, master
}

TEST_CASE("rendezvous: MIN:MAX takes nodes joining within the last call") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 4)));
  std::vector<std::future<Assignment>> futures;
  for (auto& n : nodes) futures.push_back(std::async(std::launch::async, [&n] { return n->rdzv.next_rendezvous(); }));
  std::this_thread::sleep_for(100ms);  // well inside the 300 ms last call
  Node late(store, "c", settings(2, 4));
  auto late_result = late.rdzv.next_rendezvous();
  CHECK(late_result.group_world_size == 3);
  for (auto& f : futures) CHECK(f.get().group_world_size == 3);
}

TEST_CASE("rendezvous: heterogeneous nproc gives cumulative base ranks") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.push_back(std::make_unique<Node>(store, "a", settings(3, 3, 1)));
  nodes.push_back(std::make_unique<Node>(store, "b", settings(3, 3, 4)));
  nodes.push_back(std::make_unique<Node>(store, "c", settings(3, 3, 2)));
  auto r = join_all(nodes);
  CHECK(r[0].base_rank == 0);
  CHECK(r[1].base_rank == 1);
  CHECK(r[2].base_rank == 5);
  CHECK(r[2].world_size == 7);
}

TEST_CASE("rendezvous: a node beyond MAX waits as a spare and is released at close") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  auto r = join_all(nodes);
  Node spare(store, "c", settings(2, 2));
  auto spare_result = std::async(std::launch::async, [&] { spare.rdzv.next_rendezvous(); });
  CHECK(spare_result.wait_for(300ms) == std::future_status::timeout);
  nodes[0]->rdzv.close(true);
  CHECK_THROWS_AS(spare_result.get(), RendezvousClosed);
}

TEST_CASE("rendezvous: a spare of a job that failed exits as a failure, not as released") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(nodes);
  Node spare(store, "c", settings(2, 2));
  auto spare_result = std::async(std::launch::async, [&] { spare.rdzv.next_rendezvous(); });
  CHECK(spare_result.wait_for(300ms) == std::future_status::timeout);
  nodes[0]->rdzv.close(false);
  try {
    spare_result.get();
    FAIL("the spare joined a closed job");
  } catch (const RendezvousClosed&) {
    FAIL("a spare of a failed job was released as if it had succeeded");
  } catch (const RendezvousError& e) {
    CHECK_THAT(e.what(), Catch::Contains("failed while this node waited as a spare"));
  }
}

TEST_CASE("rendezvous: a node waiting for the others learns the job closed, not at join_timeout") {
  // The store's host died and a restarted node hosts a new one; the
  // survivor, too few, stops and closes the job in it. The restarted node
  // waited for a second joiner until join_timeout (600 s by default).
  FakeStore store;
  Node waiting(store, "a", settings(2, 2));
  auto result = std::async(std::launch::async, [&] { waiting.rdzv.next_rendezvous(); });
  CHECK(result.wait_for(300ms) == std::future_status::timeout);
  Node closer(store, "b", settings(2, 2));
  closer.rdzv.close(false);
  REQUIRE(result.wait_for(3s) == std::future_status::ready);  // join_timeout is 10 s
  CHECK_THROWS_WITH(result.get(), Catch::Contains("was closed while this node waited to join"));
}

TEST_CASE("rendezvous: a store restarted empty is a failed keep-alive, not a wait of read_timeout") {
  // The store's host died and a restarted node hosts a new, empty store on
  // the same port. Beats to it succeeded, and the dead-member check waited
  // read_timeout (60 s) for the round's rank list: the agent hung at exit.
  FakeStore store;
  auto s = settings(2, 2);
  s.read_timeout = 10s;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, s));
  join_all(nodes);
  nodes[1]->rdzv.keep_alive();
  nodes[1]->rdzv.keep_alive();
  store.forget_everything();
  CHECK_THROWS_WITH(nodes[1]->rdzv.keep_alive(), Catch::Contains("no longer knows this job"));
  CHECK_THROWS_WITH(nodes[1]->rdzv.keep_alive(), Catch::Contains("no longer knows this job"));  // and stays so
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(nodes[1]->rdzv.dead_members(), Catch::Contains("no longer knows round 0"));
  CHECK(std::chrono::steady_clock::now() - started < 2s);
}

TEST_CASE("rendezvous: a spare beyond a fixed --nnodes counts as waiting, to fill a dead member's place") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(nodes);
  CHECK(nodes[0]->rdzv.num_nodes_waiting() == 0);
  Node spare(store, "c", settings(2, 2));
  auto spare_result = std::async(std::launch::async, [&] { return spare.rdzv.next_rendezvous(); });
  for (int i = 0; i < 200 && nodes[0]->rdzv.num_nodes_waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
  CHECK(nodes[0]->rdzv.num_nodes_waiting() == 1);
  // b died: a and the spare form the next round at the same size.
  nodes[0]->rdzv.start_next_round();
  auto a_result = std::async(std::launch::async, [&] { return nodes[0]->rdzv.next_rendezvous(2); });
  REQUIRE(a_result.wait_for(5s) == std::future_status::ready);
  REQUIRE(spare_result.wait_for(5s) == std::future_status::ready);
  CHECK(a_result.get().group_world_size == 2);
  CHECK(spare_result.get().round == 1);
}

namespace {
// A client whose write of one key stalls, as a slow node's would.
struct StallingClient : FakeStore::Client {
  StallingClient(FakeStore& store, std::string addr, std::string slow_key, std::chrono::milliseconds stall)
      : FakeStore::Client(store, std::move(addr)), slow_key(std::move(slow_key)), stall(stall) {}
  void set(const std::string& k, const std::string& v) override {
    if (k.ends_with(slow_key)) std::this_thread::sleep_for(stall);
    FakeStore::Client::set(k, v);
  }
  std::string slow_key;
  std::chrono::milliseconds stall;
};
}  // namespace

TEST_CASE("rendezvous: a spare that sees the round full first completes it for the members") {
  // b takes the last slot, then stalls before completing the round; c joins
  // beyond max meanwhile, finds the count at max and completes the round
  // itself. c is a spare and computes no assignments: a member must.
  FakeStore store;
  auto pick = [](const std::vector<std::string>&) { return 1000; };
  auto quiet = [](const std::string&) {};
  auto s = settings(2, 2);
  s.progress_interval = 5s;  // a sleeps until a wake key, never re-counts on its own
  Node a(store, "a", s);
  StallingClient b_client(store, "b", "/node/1", 600ms);
  C10dRendezvous b(b_client, s, pick, quiet);
  Node c(store, "c", s);
  auto a_result = std::async(std::launch::async, [&] { return a.rdzv.next_rendezvous(); });
  std::this_thread::sleep_for(100ms);
  auto b_result = std::async(std::launch::async, [&] { return b.next_rendezvous(); });
  std::this_thread::sleep_for(200ms);  // b holds slot 1 and stalls
  auto c_result = std::async(std::launch::async, [&] { c.rdzv.next_rendezvous(); });
  REQUIRE(a_result.wait_for(5s) == std::future_status::ready);
  REQUIRE(b_result.wait_for(5s) == std::future_status::ready);
  CHECK(a_result.get().group_world_size == 2);
  CHECK(b_result.get().group_world_size == 2);
  CHECK(c_result.wait_for(100ms) == std::future_status::timeout);  // a spare
  a.rdzv.close(true);
  CHECK_THROWS_AS(c_result.get(), RendezvousClosed);
}

TEST_CASE("rendezvous: the next round re-forms the group with a spare") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  auto first = join_all(nodes);
  CHECK(first[0].round == 0);
  nodes[0]->rdzv.start_next_round();
  auto second = join_all(nodes);
  CHECK(second[0].round == 1);
  CHECK(second[1].round == 1);
  CHECK(second[0].group_rank != second[1].group_rank);
}

TEST_CASE("rendezvous: a job launched again under a killed job's id opens the next round") {
  // a and b form round 0 and die (no keep-alive ever moves); x and y, the
  // same job launched again, find the round full. With no member left to
  // open the next round, they open it themselves and form it.
  FakeStore store;
  std::vector<std::unique_ptr<Node>> killed, relaunched;
  for (const char* addr : {"a", "b"}) killed.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(killed);
  auto s = settings(2, 2);
  s.keep_alive_interval = 50ms;
  s.keep_alive_max_attempt = 3;
  for (const char* addr : {"x", "y"}) relaunched.push_back(std::make_unique<Node>(store, addr, s));
  std::vector<std::future<Assignment>> futures;
  for (auto& n : relaunched) futures.push_back(std::async(std::launch::async, [&n] { return n->rdzv.next_rendezvous(); }));
  bool formed = true;
  for (auto& f : futures) formed = formed && f.wait_for(5s) == std::future_status::ready;
  if (!formed) killed[0]->rdzv.close(true);  // releases them, so the test fails rather than hangs
  REQUIRE(formed);
  std::set<int> ranks;
  for (auto& f : futures) {
    const Assignment a = f.get();
    CHECK(a.round == 1);
    CHECK(a.group_world_size == 2);
    ranks.insert(a.group_rank);
  }
  CHECK(ranks == std::set<int>{0, 1});
}

TEST_CASE("rendezvous: a spare waits while any member of the round is alive") {
  FakeStore store;
  auto s = settings(2, 2);
  s.keep_alive_interval = 50ms;
  s.keep_alive_max_attempt = 3;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, s));
  join_all(nodes);
  std::atomic<bool> beating{true};
  std::thread beats([&] {  // a lives on; b died
    while (beating) {
      nodes[0]->rdzv.keep_alive();
      std::this_thread::sleep_for(20ms);
    }
  });
  Node spare(store, "c", s);
  auto spare_result = std::async(std::launch::async, [&] { spare.rdzv.next_rendezvous(); });
  CHECK(spare_result.wait_for(600ms) == std::future_status::timeout);  // 4x the keep-alive window
  beating = false;
  beats.join();
  nodes[0]->rdzv.close(true);
  CHECK_THROWS_AS(spare_result.get(), RendezvousClosed);
}

TEST_CASE("rendezvous: clear errors for closed jobs, id clashes and --nnodes mismatch") {
  FakeStore store;
  Node a(store, "a", settings(1, 1));
  a.rdzv.next_rendezvous();
  Node other_nnodes(store, "b", settings(2, 4));
  CHECK_THROWS_WITH(other_nnodes.rdzv.next_rendezvous(), Catch::Contains("--nnodes=2:4 disagrees with --nnodes=1"));
  auto s = settings(1, 1);
  s.entrypoint = "other_program";
  Node clash(store, "c", s);
  CHECK_THROWS_WITH(clash.rdzv.next_rendezvous(), Catch::Contains("is in use by another job"));
  a.rdzv.close(true);
  Node after(store, "d", settings(1, 1));
  CHECK_THROWS_WITH(after.rdzv.next_rendezvous(), Catch::Contains("is closed"));
}

TEST_CASE("rendezvous: join timeout names the job and the count") {
  FakeStore store;
  auto s = settings(3, 3);
  s.join_timeout = 300ms;
  Node lonely(store, "a", s);
  CHECK_THROWS_WITH(lonely.rdzv.next_rendezvous(),
                    Catch::Contains("waiting for rendezvous job=job at fake:0: 1/3 nodes joined"));
}

TEST_CASE("rendezvous: a member whose keep-alives stop is reported dead") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) {
    auto s = settings(2, 2);
    s.keep_alive_interval = 50ms;
    s.keep_alive_max_attempt = 3;
    nodes.push_back(std::make_unique<Node>(store, addr, s));
  }
  join_all(nodes);
  CHECK(nodes[0]->rdzv.dead_members().empty());
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(50ms);
    nodes[1]->rdzv.keep_alive();
    CHECK(nodes[0]->rdzv.dead_members().empty());
  }
  std::this_thread::sleep_for(200ms);  // > 3 x 50 ms without a beat from b
  CHECK(nodes[0]->rdzv.dead_members() == std::vector<int>{1});
}

TEST_CASE("rdzv-conf keys and values") {
  RendezvousSettings s;
  CHECK(apply_rdzv_conf({{"join_timeout", "5"}, {"last_call_timeout", "0.5"}, {"is_host", "Yes"}}, s) == "true");
  CHECK(s.join_timeout == 5s);
  CHECK(s.last_call_timeout == 500ms);
  CHECK_THROWS_WITH(apply_rdzv_conf({{"join_timeout", "-1"}}, s), Catch::Contains("join_timeout=-1"));
  CHECK_THROWS_WITH(apply_rdzv_conf({{"bogus", "1"}}, s), Catch::Contains("unknown key"));
  CHECK_THROWS_WITH(apply_rdzv_conf({{"is_host", "maybe"}}, s), Catch::Contains("valid boolean"));
}

TEST_CASE("rendezvous: every failing node's record reaches every node, in arrival order") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b", "c"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(3, 3)));
  join_all(nodes);
  CHECK(nodes[2]->rdzv.outcome().failure_records().empty());
  nodes[1]->rdzv.outcome().publish_failure(R"({"host": "b"})");
  nodes[0]->rdzv.outcome().publish_failure(R"({"host": "a"})");
  for (auto& n : nodes) {
    CHECK(n->rdzv.outcome().failure_records() == std::vector<std::string>{R"({"host": "b"})", R"({"host": "a"})"});
    CHECK(n->client.get(n->rdzv.outcome().event_key()) == "abort");
  }
  CHECK_THROWS_AS(nodes[2]->rdzv.outcome().publish_failure("two\nlines"), std::invalid_argument);
}

TEST_CASE("rendezvous: the failure summary waits for every member to stop, within its bound") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b", "c"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(3, 3)));
  join_all(nodes);
  auto first = std::async(std::launch::async, [&] { nodes[0]->rdzv.outcome().wait_all_stopped(10s); });
  CHECK(first.wait_for(200ms) == std::future_status::timeout);  // b and c are still stopping
  nodes[1]->rdzv.outcome().publish_failure("b's record");
  auto second = std::async(std::launch::async, [&] { nodes[1]->rdzv.outcome().wait_all_stopped(10s); });
  CHECK(second.wait_for(100ms) == std::future_status::timeout);
  nodes[2]->rdzv.outcome().wait_all_stopped(10s);  // the last one: returns at once, releases the others
  CHECK(first.wait_for(2s) == std::future_status::ready);
  CHECK(second.wait_for(2s) == std::future_status::ready);
  CHECK(nodes[0]->rdzv.outcome().failure_records() == std::vector<std::string>{"b's record"});
  // A member that never stops costs the bound, no more.
  FakeStore lone_store;
  std::vector<std::unique_ptr<Node>> pair;
  for (const char* addr : {"a", "b"}) pair.push_back(std::make_unique<Node>(lone_store, addr, settings(2, 2)));
  join_all(pair);
  const auto start = std::chrono::steady_clock::now();
  pair[0]->rdzv.outcome().wait_all_stopped(300ms);
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
}

TEST_CASE("rendezvous: a scheduler's node order decides group ranks before addresses") {
  // Slurm's SLURM_NODEID (launcher/slurm.h): rank 0 on the first node of
  // the step even when its address sorts last; a node without an order
  // comes after those with one.
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  const std::vector<std::pair<const char*, std::optional<int>>> layout = {
      {"10.0.0.1", std::nullopt}, {"10.0.0.2", 1}, {"10.0.0.3", 2}, {"10.0.0.9", 0}};
  for (const auto& [addr, order] : layout) {
    RendezvousSettings s = settings(4, 4);
    s.node_order = order;
    nodes.push_back(std::make_unique<Node>(store, addr, s));
  }
  auto result = join_all(nodes);
  CHECK(result[3].group_rank == 0);
  CHECK(result[1].group_rank == 1);
  CHECK(result[2].group_rank == 2);
  CHECK(result[0].group_rank == 3);
  for (const auto& a : result) CHECK(a.master_addr == "10.0.0.9");
}

TEST_CASE("rendezvous: a member record keeps its group, and records without one still parse") {
  Member m{"10.0.0.1", "n1", 42, 8, 3, "nvl72-a"};
  CHECK(parse_member(describe(m)).group == "nvl72-a");
  CHECK(parse_member("10.0.0.1|n1|42|8|3").group.empty());
  CHECK(parse_member("10.0.0.1|n1|42|8|3").order == 3);
}

TEST_CASE("rendezvous: the liveness check of a node whose store went away ends on the keep-alive deadline") {
  // The chaos suite's restarted-host: the store died before the first
  // check, so the check's first read of the round's ranks reconnected with
  // the main client's deadline (read_timeout) and held the agent's exit.
  VanishingStore store;
  auto main_client = store.client();
  auto beats = store.client(500ms);
  C10dRendezvous rdzv(*main_client, settings(1, 1), [](const std::vector<std::string>&) { return 1000; },
                      [](const std::string&) {});
  rdzv.use_for_keep_alives(*beats);
  rdzv.next_rendezvous();
  store.stop();
  const auto began = std::chrono::steady_clock::now();
  CHECK_THROWS(rdzv.dead_members());
  CHECK(std::chrono::steady_clock::now() - began < 10s);
}
