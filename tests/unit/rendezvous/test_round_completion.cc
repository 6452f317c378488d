// RoundCompletion: when a forming round completes, as a pure function of
// what a waiting node saw and when (rendezvous/round_completion.h).
#include <catch2/catch.hpp>

#include "rendezvous/round_completion.h"

using namespace cxxrun::rendezvous;
using namespace std::chrono_literals;
using Catch::Contains;
using Clock = RoundCompletion::Clock;

namespace {

RendezvousSettings nodes(int min, int max) {
  RendezvousSettings s;
  s.run_id = "job";
  s.endpoint = "fake:0";
  s.min_nodes = min;
  s.max_nodes = max;
  s.join_timeout = 600s;
  s.last_call_timeout = 30s;
  s.progress_interval = 5s;
  s.keep_alive_interval = 1s;
  return s;
}

RoundSeen seen(int count, int stepped_out = 0, std::vector<std::string> declined = {}) {
  return RoundSeen{count, stepped_out, std::move(declined)};
}

}  // namespace

TEST_CASE("round completion: max joiners complete it at once, fewer than min wait for the min-th") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(2, 4), 0, t0 + 600s);
  auto next = rule.next(seen(4), t0);
  REQUIRE(next.members);
  CHECK(*next.members == 4);
  next = rule.next(seen(1), t0);
  CHECK_FALSE(next.members);
  CHECK(next.milestone == 2);
  CHECK(next.until == t0 + 5s);  // progress_interval: look again then
  CHECK(next.say.empty());
}

TEST_CASE("round completion: min joiners complete it after the last call, unless max come first") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(2, 4), 0, t0 + 600s);
  auto next = rule.next(seen(2), t0);
  CHECK_FALSE(next.members);
  CHECK(next.milestone == 4);
  next = rule.next(seen(3), t0 + 29s);
  CHECK_FALSE(next.members);
  CHECK(next.until == t0 + 30s);  // the last call's end
  next = rule.next(seen(3), t0 + 30s);
  REQUIRE(next.members);
  CHECK(*next.members == 3);
}

TEST_CASE("round completion: re-forming completes with the nodes expected, less those that stepped out") {
  const auto t0 = Clock::now();
  // Table: {min, max, expected, count, stepped out} -> members (0: wait, -1: lost).
  struct Row {
    int min, max, expected, count, out, members;
  };
  for (const Row& r : {Row{2, 2, 2, 2, 0, 2}, Row{1, 3, 3, 3, 0, 3}, Row{1, 3, 3, 2, 1, 2}, Row{1, 3, 3, 1, 0, 0},
                       Row{2, 2, 2, 1, 1, -1}, Row{2, 2, 3, 1, 1, 0}, Row{2, 3, 4, 3, 0, 3}}) {
    INFO("min " << r.min << " max " << r.max << " expected " << r.expected << " count " << r.count << " out " << r.out);
    RoundCompletion rule(nodes(r.min, r.max), r.expected, t0 + 600s);
    if (r.members < 0) {
      CHECK_THROWS_AS(rule.next(seen(r.count, r.out), t0), RendezvousLost);
      continue;
    }
    const auto next = rule.next(seen(r.count, r.out), t0);
    CHECK(next.members.value_or(0) == r.members);
    // Waiting while re-forming looks again within a keep-alive interval.
    if (!next.members) CHECK(next.until <= t0 + 1s);
  }
}

TEST_CASE("round completion: a first round whose places are all taken or declined gives a spare the last call") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(2, 2), 0, t0 + 600s);
  const std::vector<std::string> declined = {"n2 (pid 7) health check 'command' failed: disk full"};
  CHECK_FALSE(rule.reads_declines());
  auto next = rule.next(seen(1, 0, declined), t0);
  CHECK_FALSE(next.members);
  CHECK_THAT(next.say, Contains("waiting up to 30 s (last_call_timeout) for a spare"));
  CHECK(rule.reads_declines());
  next = rule.next(seen(1, 0, declined), t0 + 10s);
  CHECK(next.say.empty());  // said once
  CHECK(next.until <= t0 + 30s);
  try {
    rule.next(seen(1, 0, declined), t0 + 30s);
    FAIL("no verdict at the spare's deadline");
  } catch (const RendezvousLost& e) {
    CHECK_THAT(e.what(), Contains("1 node of job job stepped out before joining (n2 (pid 7) health check 'command' "
                                  "failed: disk full) and no spare came within 30 s: 1 node is in, fewer than the "
                                  "minimum of 2 (--nnodes=2); stopping"));
  }
}

TEST_CASE("round completion: a spare that comes in time completes a round with a declined place") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(2, 2), 0, t0 + 600s);
  rule.next(seen(1, 0, {"n2 (pid 7) NIC down"}), t0);
  const auto next = rule.next(seen(2, 0, {"n2 (pid 7) NIC down"}), t0 + 20s);
  REQUIRE(next.members);
  CHECK(*next.members == 2);
}

TEST_CASE("round completion: declines short of every place wait for the nodes still to come") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(3, 3), 0, t0 + 600s);
  const auto next = rule.next(seen(1, 0, {"n2 (pid 7) NIC down"}), t0 + 100s);
  CHECK_FALSE(next.members);
  CHECK(next.say.empty());
  CHECK_FALSE(rule.reads_declines());
  CHECK(next.milestone == 3);
}

TEST_CASE("round completion: join_timeout is a timeout, not a lost job") {
  const auto t0 = Clock::now();
  RoundCompletion rule(nodes(2, 2), 0, t0 + 600s);
  try {
    rule.next(seen(1), t0 + 600s);
    FAIL("no timeout");
  } catch (const RendezvousLost&) {
    FAIL("a timeout is not a lost job");
  } catch (const RendezvousError& e) {
    CHECK_THAT(e.what(), Contains("timed out after 600 s waiting for rendezvous job=job at fake:0: 1/2 nodes joined"));
  }
}

TEST_CASE("too few alive: one wording, in the user's --nnodes spelling and plain English") {
  CHECK(too_few_alive(nodes(2, 3), 1) ==
        "only 1 node of job job is alive, fewer than the minimum of 2 (--nnodes=2:3); stopping");
  CHECK(too_few_alive(nodes(3, 3), 2) ==
        "only 2 nodes of job job are alive, fewer than the minimum of 3 (--nnodes=3); stopping");
}
