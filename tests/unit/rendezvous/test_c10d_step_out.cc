// The c10d rendezvous when nodes step out (a failed health check between
// rounds) or decline a first round, and the spares that take their places
// (rendezvous/c10d_rendezvous.h, rendezvous/round_completion.h,
// rendezvous/c10d_backend.h).
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "c10d_nodes.h"
#include "rendezvous/c10d_backend.h"

using namespace cxxrun::rendezvous;
using namespace c10d_nodes;
using namespace std::chrono_literals;

TEST_CASE("rendezvous: a member that steps out is not waited for; with no spare the job is lost at once") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(nodes);
  // b fails its health check between rounds; a re-forms expecting 2.
  nodes[0]->rdzv.start_next_round();
  auto rejoin = std::async(std::launch::async, [&] { return nodes[0]->rdzv.next_rendezvous(2); });
  CHECK(rejoin.wait_for(200ms) == std::future_status::timeout);  // still waiting for b
  const auto start = std::chrono::steady_clock::now();
  nodes[1]->rdzv.step_out();
  CHECK(nodes[0]->rdzv.stepped_out() == 1);
  CHECK_THROWS_AS(rejoin.get(), RendezvousLost);
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // not at join_timeout (10 s here)
}

TEST_CASE("rendezvous: a node that declines the first round is named, and with no spare the job is lost") {
  FakeStore store;
  auto s = settings(2, 2);
  s.last_call_timeout = 400ms;  // the grace a spare gets
  Node a(store, "a", s);
  auto joined = std::async(std::launch::async, [&] { return a.rdzv.next_rendezvous(); });
  CHECK(joined.wait_for(200ms) == std::future_status::timeout);
  const auto start = std::chrono::steady_clock::now();
  Node b(store, "b", s);
  b.rdzv.decline("health check 'command' failed: GPU 1 has ECC errors");
  try {
    joined.get();
    FAIL("joined without a second node");
  } catch (const RendezvousLost& e) {
    const std::string what = e.what();
    CHECK(what.find("stepped out before joining") != std::string::npos);
    CHECK(what.find("GPU 1 has ECC errors") != std::string::npos);
  }
  // Found at a progress read (100 ms here), then the spare's grace.
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // not at join_timeout (10 s here)
}

TEST_CASE("rendezvous: a spare that comes within the grace takes a declined node's place") {
  FakeStore store;
  auto s = settings(2, 2);
  s.last_call_timeout = 2s;
  Node a(store, "a", s), b(store, "b", s), spare(store, "c", s);
  auto ja = std::async(std::launch::async, [&] { return a.rdzv.next_rendezvous(); });
  b.rdzv.decline("disk full");
  std::this_thread::sleep_for(300ms);  // a has seen the decline and waits for a spare
  auto jc = std::async(std::launch::async, [&] { return spare.rdzv.next_rendezvous(); });
  CHECK(ja.get().group_world_size == 2);
  CHECK(jc.get().group_world_size == 2);
}

TEST_CASE("rendezvous: declines below the number of places wait for the nodes still to come") {
  FakeStore store;
  auto s = settings(3, 3);
  s.last_call_timeout = 100ms;
  Node a(store, "a", s), b(store, "b", s), c(store, "c", s);
  auto ja = std::async(std::launch::async, [&] { return a.rdzv.next_rendezvous(); });
  b.rdzv.decline("NIC down");
  // One place is neither taken nor declined: no verdict yet.
  CHECK(ja.wait_for(500ms) == std::future_status::timeout);
  Node d(store, "d", s);
  auto jc = std::async(std::launch::async, [&] { return c.rdzv.next_rendezvous(); });
  auto jd = std::async(std::launch::async, [&] { return d.rdzv.next_rendezvous(); });
  CHECK(ja.get().group_world_size == 3);
  CHECK(jc.get().group_world_size == 3);
  CHECK(jd.get().group_world_size == 3);
}

TEST_CASE("rendezvous: a member that steps out is replaced by a spare in the next round") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, settings(2, 2)));
  join_all(nodes);
  nodes[1]->rdzv.step_out();
  Node spare(store, "c", settings(2, 2));
  nodes[0]->rdzv.start_next_round();
  // The backend's count: 2 members alive and 1 spare waiting.
  auto a = std::async(std::launch::async, [&] { return nodes[0]->rdzv.next_rendezvous(3); });
  auto c = std::async(std::launch::async, [&] { return spare.rdzv.next_rendezvous(); });
  const Assignment ra = a.get(), rc = c.get();
  CHECK(ra.round == 1);
  CHECK(rc.round == 1);
  CHECK(ra.group_world_size == 2);
  CHECK(ra.group_rank != rc.group_rank);
}

TEST_CASE("rendezvous: an elastic job re-forms at once without a member that stepped out") {
  FakeStore store;
  std::vector<std::unique_ptr<Node>> nodes;
  auto s = settings(1, 3);
  s.last_call_timeout = 5s;  // would be the wait without the step-out
  for (const char* addr : {"a", "b", "c"}) nodes.push_back(std::make_unique<Node>(store, addr, s));
  join_all(nodes);
  nodes[2]->rdzv.step_out();
  nodes[0]->rdzv.start_next_round();
  const auto start = std::chrono::steady_clock::now();
  auto a = std::async(std::launch::async, [&] { return nodes[0]->rdzv.next_rendezvous(3); });
  auto b = std::async(std::launch::async, [&] { return nodes[1]->rdzv.next_rendezvous(3); });
  CHECK(a.get().group_world_size == 2);
  CHECK(b.get().group_world_size == 2);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("rendezvous: when several spares wait, one of the job's --node-group takes the free place") {
  FakeStore store;
  auto in_group = [](const std::string& g) {
    auto s = settings(2, 2);
    s.node_group = g;
    return s;
  };
  std::vector<std::unique_ptr<Node>> nodes;
  for (const char* addr : {"a", "b"}) nodes.push_back(std::make_unique<Node>(store, addr, in_group("rack1")));
  join_all(nodes);
  // The far spare waits first; the near one comes later.
  Node far(store, "x", in_group("rack9"));
  auto far_result = std::async(std::launch::async, [&] { return far.rdzv.next_rendezvous(); });
  std::this_thread::sleep_for(100ms);
  Node near(store, "y", in_group("rack1"));
  auto near_result = std::async(std::launch::async, [&] { return near.rdzv.next_rendezvous(); });
  std::this_thread::sleep_for(100ms);
  nodes[1]->rdzv.step_out();
  nodes[0]->rdzv.start_next_round();
  // 2 members alive and 2 spares waiting, 1 stepped out.
  const Assignment a = nodes[0]->rdzv.next_rendezvous(4);
  const Assignment y = near_result.get();
  CHECK(a.round == 1);
  CHECK(y.round == 1);
  CHECK(a.group_rank != y.group_rank);
  CHECK(far_result.wait_for(300ms) == std::future_status::timeout);  // still a spare
  nodes[0]->rdzv.close(true);
  CHECK_THROWS_AS(far_result.get(), RendezvousClosed);
}


TEST_CASE("rendezvous: a step-out read before the re-join is named as the cause, as the join would name it") {
  // Which of the two reads the count first is a race between nodes; the
  // verdict must not depend on it (it said "only 1 nodes are alive" here).
  FakeStore store;
  C10dBackend a = backend(store, "a"), b = backend(store, "b");
  auto ja = std::async(std::launch::async, [&] { return a.join(); });
  auto jb = std::async(std::launch::async, [&] { return b.join(); });
  ja.get();
  jb.get();
  b.step_out();
  try {
    a.rejoin();
    FAIL("re-formed without the node that stepped out");
  } catch (const RendezvousLost& e) {
    const std::string what = e.what();
    CHECK(what.find("1 node of job job stepped out (a failed health check) and no spare waits") !=
          std::string::npos);
    CHECK(what.find("fewer than the minimum of 2 (--nnodes=2)") != std::string::npos);
  }
}
