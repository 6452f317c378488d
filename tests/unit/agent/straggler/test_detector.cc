// Who is a straggler among its peers (agent/straggler/detector.h): the
// peer-relative rule on made-up windows, its hysteresis, and the words.
#include <catch2/catch.hpp>

#include "agent/straggler/detector.h"

using namespace cxxrun::agent;

namespace {

PeerWindow computing(int id, double running, double blocked) {
  PeerWindow p;
  p.id = id;
  p.running = running;
  p.blocked = blocked;
  return p;
}

// Four ranks of a synchronous job: three compute a quarter of the time and
// wait the rest; `slow` (or none, -1) computes all the time.
std::vector<PeerWindow> four(int slow, double slow_running = 0.95) {
  std::vector<PeerWindow> w;
  for (int r = 0; r < 4; ++r)
    w.push_back(r == slow ? computing(r, slow_running, 0.02) : computing(r, 0.24 + 0.01 * r, 0.72));
  return w;
}

}  // namespace

TEST_CASE("the rank that computes while its peers wait is slow, by how much", "[straggler]") {
  const auto slow = slow_peers(four(3));
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].id == 3);
  CHECK(slow[0].signal == SlowSignal::compute);
  CHECK(slow[0].ratio == Approx(0.95 / 0.25).epsilon(0.01));
  CHECK(slow_peers(four(-1)).empty());
}

TEST_CASE("two peers are told apart: the yardstick leaves the peer itself out", "[straggler]") {
  const auto slow = slow_peers({computing(0, 0.2, 0.75), computing(1, 0.9, 0.05)});
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].id == 1);
  CHECK(slow_peers({computing(0, 0.9, 0.05)}).empty());  // one peer: no yardstick
}

TEST_CASE("a uniformly slow job has no straggler, nor does noise among near-identical peers", "[straggler]") {
  CHECK(slow_peers({computing(0, 0.95, 0.0), computing(1, 0.97, 0.0), computing(2, 0.93, 0.0)}).empty());
  // The others' MAD is tiny (0.30, 0.31, 0.30): the absolute floor holds.
  CHECK(slow_peers({computing(0, 0.30, 0.6), computing(1, 0.31, 0.6), computing(2, 0.30, 0.6),
                    computing(3, 0.45, 0.5)})
            .empty());
}

TEST_CASE("one-sided: computing more is slow only while the peers wait", "[straggler]") {
  // Peers busy too (no collective waits): not a straggler.
  CHECK(slow_peers({computing(0, 0.6, 0.05), computing(1, 0.6, 0.05), computing(2, 0.95, 0.0)}).empty());
  // One rank waiting while the others compute is not slow (it is the fast one).
  CHECK(slow_peers({computing(0, 0.9, 0.05), computing(1, 0.9, 0.05), computing(2, 0.1, 0.85)}).empty());
}

TEST_CASE("step time per rank where ranks step at different rates", "[straggler]") {
  auto w = four(-1);
  const double steps[] = {1.0, 1.05, 0.98, 2.1};
  for (int r = 0; r < 4; ++r) w[r].step_seconds = steps[r];
  const auto slow = slow_peers(w);
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].id == 3);
  CHECK(slow[0].signal == SlowSignal::step);
  CHECK(slow[0].ratio == Approx(2.1 / 1.0).epsilon(0.03));
  w[3].step_seconds = 1.1;  // within the floor
  CHECK(slow_peers(w).empty());
}

TEST_CASE("a throttled GPU clock against its peers', only with a throttle reason", "[straggler]") {
  auto w = four(-1);
  for (auto& p : w) p.gpu_clock = 1.0;
  w[2].gpu_clock = 0.45;
  CHECK(slow_peers(w).empty());  // a low clock alone: an idle GPU
  w[2].gpu_throttle = "thermal";
  const auto slow = slow_peers(w);
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].id == 2);
  CHECK(slow[0].signal == SlowSignal::gpu);
  CHECK(slow[0].ratio == Approx(1.0 / 0.45));
}

TEST_CASE("named after 3 slow windows of the last 4, once; cleared after 6 normal ones", "[straggler]") {
  PeerJudge judge(false);
  CHECK(judge.window(four(3), 5).empty());
  CHECK(judge.window(four(-1), 5).empty());
  CHECK(judge.window(four(-1), 5).empty());  // two of four: not yet
  CHECK(judge.window(four(3), 5).empty());
  CHECK(judge.window(four(-1), 5).empty());
  CHECK(judge.window(four(3), 5).empty());   // slow, normal, slow: two of the last four
  auto named = judge.window(four(3), 5);     // three of the last four
  REQUIRE(named.size() == 1);
  CHECK(named[0].id == 3);
  CHECK(named[0].named);
  CHECK(judge.named(3));
  CHECK(judge.window(four(3), 5).empty());  // said once
  for (int i = 0; i < 5; ++i) CHECK(judge.window(four(-1), 5).empty());
  CHECK(judge.named(3));
  auto cleared = judge.window(four(-1), 5);
  REQUIRE(cleared.size() == 1);
  CHECK_FALSE(cleared[0].named);
  CHECK_FALSE(judge.named(3));
}

TEST_CASE("the cause: what sets the straggler apart over the last windows", "[straggler]") {
  PeerJudge judge(false);
  std::vector<StragglerVerdict> named;
  for (int i = 0; i < 3; ++i) {
    auto w = four(1);
    for (auto& p : w) {
      p.throttled = p.id == 1 ? 0.48 : 0.0;
      p.steal = 0.3;  // host-wide: every rank alike
    }
    w[1].cgroup = "/sys/fs/cgroup/cpu/slow";
    named = judge.window(w, 5);
  }
  REQUIRE(named.size() == 1);
  REQUIRE(named[0].causes.size() == 1);
  CHECK(named[0].causes[0].kind == SlowCause::Kind::cgroup_throttle);
  CHECK(describe_causes(named[0].causes) ==
        "its cgroup /sys/fs/cgroup/cpu/slow was CPU-throttled for 48 % of the last 15 s");
  CHECK(describe_slowness(named[0], "rank") == "computes 3.7x as long as the median rank between collectives");
}

TEST_CASE("causes in words: a throttled GPU, steal between nodes, none found", "[straggler]") {
  std::deque<std::vector<PeerWindow>> history;
  const std::deque<double> seconds(1, 30.0);
  auto w = four(2);
  w[2].gpu_clock = 0.45;
  w[2].gpu_throttle = "thermal";
  for (auto& p : w) p.steal = p.id == 2 ? 0.2 : 0.0;
  history.push_back(w);
  auto ranks = causes_of(2, history, seconds, false);
  REQUIRE(ranks.size() == 1);  // steal is the host's, the same for every rank of it
  CHECK(describe_causes(ranks) == "its GPU is throttled (thermal): SM clock at 45 % of its maximum");
  auto nodes = causes_of(2, history, seconds, true);
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[1].kind == SlowCause::Kind::steal);
  CHECK(describe_causes({}).rfind("no host cause found", 0) == 0);
  w[3].run_delay = 0.4;
  history.assign(1, w);
  auto wait = causes_of(3, history, seconds, false);
  REQUIRE(wait.size() == 1);
  CHECK(describe_causes(wait) ==
        "it waited for a CPU for 40 % of the last 30 s (other processes compete for its cores)");
  // Time its cgroup throttled it is not a wait for a CPU besides.
  w[3].throttled = 0.35;
  history.assign(1, w);
  auto both = causes_of(3, history, seconds, false);
  REQUIRE(both.size() == 1);
  CHECK(both[0].kind == SlowCause::Kind::cgroup_throttle);
}

TEST_CASE("how much slower, for each signal", "[straggler]") {
  StragglerVerdict v;
  v.signal = SlowSignal::step;
  v.ratio = 2.1;
  v.value = 3.2;
  v.peers = 1.52;
  CHECK(describe_slowness(v, "rank") == "takes 2.1x the median rank's step time (3.20 s against 1.52 s)");
  v.signal = SlowSignal::gpu;
  v.ratio = 2.2;
  v.value = 0.45;
  v.peers = 0.99;
  CHECK(describe_slowness(v, "node") ==
        "runs its GPU 2.2x slower than the median node (SM clock at 45 % of its maximum against 99 %)");
}
