// Goodput (agent/progress/goodput.h): a node's wall time split into phases
// on made-up times, the spans the event log gets, and the line a user reads.
#include <catch2/catch.hpp>

#include <vector>

#include "agent/progress/goodput.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point t0 = Clock::time_point{} + 1000s;
const std::chrono::system_clock::time_point wall0 = std::chrono::system_clock::time_point{} + 1'700'000'000s;

struct Recorded {
  std::vector<PhaseSpan> spans;
  Goodput g{t0, wall0, [this](const PhaseSpan& s) { spans.push_back(s); }};

  // The spans as (phase, from, to) in seconds after t0.
  std::vector<std::tuple<std::string, double, double>> seen() const {
    std::vector<std::tuple<std::string, double, double>> out;
    for (const auto& s : spans)
      out.emplace_back(std::string(goodput_phase_name(s.phase)), std::chrono::duration<double>(s.start - t0).count(),
                       std::chrono::duration<double>(s.end - t0).count());
    return out;
  }
};

AttemptRecord record(int attempt, Clock::time_point spawn) {
  AttemptRecord r;
  r.attempt = attempt;
  r.started = spawn;
  return r;
}

std::chrono::nanoseconds sum(const GoodputTotals& t) {
  std::chrono::nanoseconds total{0};
  for (auto d : t.by_phase) total += d;
  return total;
}

}  // namespace

TEST_CASE("a job that succeeds at once: rendezvous, startup, productive, teardown", "[goodput]") {
  Recorded r;
  r.g.rendezvous_began(t0 + 1s);  // setup before the join waits
  r.g.rendezvous_done(t0 + 3s);
  r.g.attempt_started(0, t0 + 3s);
  AttemptRecord a = record(0, t0 + 3s);
  a.progress(StepSource::output, 1, t0 + 5s);
  r.g.stop_requested(t0 + 20s);
  r.g.attempt_ended(&a, true, t0 + 21s);
  const GoodputTotals t = r.g.finish(t0 + 21500ms);

  using S = std::tuple<std::string, double, double>;
  CHECK(r.seen() == std::vector<S>{{"waiting", 0, 1},     {"rendezvous", 1, 3}, {"startup", 3, 5},
                                   {"productive", 5, 20}, {"teardown", 20, 21}, {"waiting", 21, 21.5}});
  CHECK(t.wall == 21500ms);
  CHECK(sum(t) == t.wall);
  CHECK(t[GoodputPhase::productive] == 15s);
  CHECK(t.ratio() == Approx(15 / 21.5));
  CHECK_FALSE(t.unknown_progress);
  CHECK(describe(t) ==
        "goodput 69.8% of 21.5 s: productive 15.0 s; startup 2.0 s, rendezvous 2.0 s, teardown 1.0 s, waiting 1.5 s");
}

TEST_CASE("a failed attempt loses its work since its last checkpoint; the next one succeeds", "[goodput]") {
  Recorded r;
  r.g.rendezvous_began(t0);
  r.g.rendezvous_done(t0 + 1s);
  r.g.attempt_started(0, t0 + 1s);
  AttemptRecord a = record(0, t0 + 1s);
  a.progress(StepSource::output, 1, t0 + 3s);
  a.checkpoint("step_10", 10, t0 + 7s);
  a.progress(StepSource::output, 14, t0 + 9s);
  r.g.stop_requested(t0 + 10s);
  r.g.attempt_ended(&a, false, t0 + 11s);
  r.g.attempt_started(1, t0 + 12s);  // health checks between: waiting
  AttemptRecord b = record(1, t0 + 12s);
  b.progress(StepSource::output, 11, t0 + 13s);
  r.g.stop_requested(t0 + 20s);
  r.g.attempt_ended(&b, true, t0 + 20s);
  const GoodputTotals t = r.g.finish(t0 + 20s);

  using S = std::tuple<std::string, double, double>;
  CHECK(r.seen() == std::vector<S>{{"rendezvous", 0, 1}, {"startup", 1, 3},  {"productive", 3, 7},
                                   {"lost", 7, 10},      {"teardown", 10, 11}, {"waiting", 11, 12},
                                   {"startup", 12, 13},  {"productive", 13, 20}});
  CHECK(r.spans[2].attempt == 0);
  CHECK(r.spans[6].attempt == 1);
  CHECK(t[GoodputPhase::lost] == 3s);
  CHECK(t[GoodputPhase::startup] == 3s);
  CHECK(t[GoodputPhase::productive] == 11s);
  CHECK(sum(t) == t.wall);
  CHECK(t.wall == 20s);
  CHECK(describe(t) == "goodput 55.0% of 20.0 s: productive 11.0 s; startup 3.0 s, lost to failures 3.0 s, "
                       "rendezvous 1.0 s, teardown 1.0 s, waiting 1.0 s");
}

TEST_CASE("without a checkpoint a failed attempt loses everything since its first progress", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  AttemptRecord a = record(0, t0);
  a.progress(StepSource::program, 3, t0 + 2s);
  r.g.stop_requested(t0 + 8s);
  r.g.attempt_ended(&a, false, t0 + 8s);
  const GoodputTotals t = r.g.finish(t0 + 8s);
  CHECK(t[GoodputPhase::startup] == 2s);
  CHECK(t[GoodputPhase::productive] == 0s);
  CHECK(t[GoodputPhase::lost] == 6s);
  CHECK(t.ratio() == 0);
  CHECK(describe(t) == "goodput 0.0% of 8.0 s: productive 0.0 s; startup 2.0 s, lost to failures 6.0 s");
}

TEST_CASE("a checkpoint of an attempt that succeeded changes nothing: a success loses nothing", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  AttemptRecord a = record(0, t0);
  a.progress(StepSource::output, 1, t0 + 1s);
  a.checkpoint("c", std::nullopt, t0 + 2s);
  r.g.stop_requested(t0 + 9s);
  r.g.attempt_ended(&a, true, t0 + 9s);
  const GoodputTotals t = r.g.finish(t0 + 9s);
  CHECK(t[GoodputPhase::lost] == 0s);
  CHECK(t[GoodputPhase::productive] == 8s);
}

TEST_CASE("an attempt with no progress is all startup", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  AttemptRecord a = record(0, t0);
  r.g.stop_requested(t0 + 4s);
  r.g.attempt_ended(&a, false, t0 + 5s);
  const GoodputTotals t = r.g.finish(t0 + 5s);
  CHECK(t[GoodputPhase::startup] == 4s);
  CHECK(t[GoodputPhase::teardown] == 1s);
  CHECK(t[GoodputPhase::lost] == 0s);
}

TEST_CASE("a hung worker's silence before the stop is hang detection, taken out of the running span", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  AttemptRecord a = record(0, t0);
  a.progress(StepSource::output, 1, t0 + 1s);
  a.checkpoint("step_5", 5, t0 + 4s);
  a.progress(StepSource::output, 7, t0 + 5s);
  r.g.hang(t0 + 6s);  // silent from 6 s; judged with its stacks, killed
  r.g.hang(t0 + 7s);  // a later verdict in the same attempt: the earliest counts
  r.g.stop_requested(t0 + 16s);
  r.g.attempt_ended(&a, false, t0 + 17s);
  r.g.finish(t0 + 17s);
  using S = std::tuple<std::string, double, double>;
  CHECK(r.seen() == std::vector<S>{{"startup", 0, 1},
                                   {"productive", 1, 4},
                                   {"lost", 4, 6},
                                   {"hang_detection", 6, 16},
                                   {"teardown", 16, 17}});
}

TEST_CASE("a hang verdict belongs to its attempt: the next starts without it", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  r.g.hang(t0 + 1s);
  r.g.stop_requested(t0 + 2s);
  r.g.hang(t0 + 1s);  // after the stop request: ignored
  r.g.attempt_ended(nullptr, false, t0 + 2s);
  r.g.attempt_started(1, t0 + 3s);
  r.g.stop_requested(t0 + 5s);
  r.g.attempt_ended(nullptr, true, t0 + 5s);
  const GoodputTotals t = r.g.finish(t0 + 5s);
  CHECK(t[GoodputPhase::hang_detection] == 1s);
  CHECK(t[GoodputPhase::productive] == 3s);  // 1 s of attempt 0, 2 s of attempt 1
}

TEST_CASE("without a progress source the running span is productive, and the line says so", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  r.g.stop_requested(t0 + 10s);
  r.g.attempt_ended(nullptr, false, t0 + 10s);
  const GoodputTotals t = r.g.finish(t0 + 10s);
  CHECK(t[GoodputPhase::productive] == 10s);
  CHECK(t.unknown_progress);
  CHECK(describe(t) == "goodput 100.0% of 10.0 s: productive 10.0 s; no progress source: startup and lost work not "
                       "known");
}

TEST_CASE("progress read from before the spawn and checkpoints outside the span are clamped into it", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0 + 1s);
  AttemptRecord a = record(0, t0 + 1s);
  a.progress(StepSource::program, 1, t0 + 900ms);  // the page's time, a grain before the spawn
  a.checkpoint("late", std::nullopt, t0 + 30s);   // polled after the stop request
  r.g.stop_requested(t0 + 5s);
  r.g.attempt_ended(&a, false, t0 + 6s);
  const GoodputTotals t = r.g.finish(t0 + 6s);
  CHECK(t[GoodputPhase::startup] == 0s);
  CHECK(t[GoodputPhase::productive] == 4s);
  CHECK(t[GoodputPhase::lost] == 0s);
  CHECK(sum(t) == t.wall);
}

TEST_CASE("spans tile the wall time: each starts where the last ended, in epoch ms", "[goodput]") {
  Recorded r;
  r.g.rendezvous_began(t0 + 250ms);
  r.g.rendezvous_done(t0 + 1250ms);
  r.g.attempt_started(0, t0 + 1300ms);
  AttemptRecord a = record(0, t0 + 1300ms);
  a.progress(StepSource::output, 1, t0 + 2s);
  r.g.stop_requested(t0 + 3s);
  r.g.attempt_ended(&a, false, t0 + 3100ms);
  r.g.rendezvous_began(t0 + 3200ms);  // a re-join
  r.g.rendezvous_done(t0 + 4s);
  r.g.attempt_started(1, t0 + 4s);
  r.g.stop_requested(t0 + 4500ms);
  r.g.attempt_ended(&a, true, t0 + 4600ms);
  const GoodputTotals t = r.g.finish(t0 + 5s);
  REQUIRE(!r.spans.empty());
  const long long base = 1'700'000'000'000LL;
  CHECK(r.spans.front().start_ms == base);
  CHECK(r.spans.back().end_ms == base + 5000);
  for (size_t i = 1; i < r.spans.size(); ++i) {
    CHECK(r.spans[i].start_ms == r.spans[i - 1].end_ms);
    CHECK(r.spans[i].start == r.spans[i - 1].end);
  }
  CHECK(sum(t) == t.wall);
  CHECK(t[GoodputPhase::rendezvous] == 1800ms);
}

TEST_CASE("live totals count the running attempt provisionally and still sum to the wall time", "[goodput]") {
  Recorded r;
  r.g.rendezvous_began(t0);
  r.g.rendezvous_done(t0 + 1s);
  r.g.attempt_started(0, t0 + 1s);
  AttemptRecord a = record(0, t0 + 1s);

  GoodputTotals t = r.g.totals(t0 + 3s, &a);  // no progress yet: startup
  CHECK(t[GoodputPhase::startup] == 2s);
  CHECK(t[GoodputPhase::productive] == 0s);
  CHECK(sum(t) == t.wall);

  a.progress(StepSource::output, 1, t0 + 4s);
  t = r.g.totals(t0 + 10s, &a);  // productive after it, as if the attempt were to succeed
  CHECK(t[GoodputPhase::startup] == 3s);
  CHECK(t[GoodputPhase::productive] == 6s);
  CHECK(t.ratio() == Approx(0.6));
  CHECK(sum(t) == t.wall);

  t = r.g.totals(t0 + 10s, nullptr);  // no progress source: all of it productive
  CHECK(t[GoodputPhase::productive] == 9s);

  r.g.stop_requested(t0 + 12s);
  t = r.g.totals(t0 + 13s, &a);
  CHECK(t[GoodputPhase::teardown] == 1s);
  CHECK(sum(t) == t.wall);
  CHECK(r.spans.size() == 1u);  // nothing of the attempt is emitted before it ends

  r.g.attempt_ended(&a, false, t0 + 13s);
  t = r.g.totals(t0 + 15s, nullptr);  // waiting now; the failure moved its work to lost
  CHECK(t[GoodputPhase::lost] == 8s);
  CHECK(t[GoodputPhase::waiting] == 2s);
  CHECK(t.wall == 15s);
  CHECK(sum(t) == t.wall);
}

TEST_CASE("finish closes what is open once; long jobs read in minutes and hours", "[goodput]") {
  Recorded r;
  r.g.rendezvous_began(t0);
  GoodputTotals t = r.g.finish(t0 + 2s);  // a signal during the join
  CHECK(t[GoodputPhase::rendezvous] == 2s);
  CHECK(r.g.finish(t0 + 9s).wall == 2s);
  CHECK(r.g.totals(t0 + 9s, nullptr).wall == 2s);

  GoodputTotals longer;
  longer.wall = 7200s;
  longer.by_phase[static_cast<size_t>(GoodputPhase::productive)] = 6000s;
  longer.by_phase[static_cast<size_t>(GoodputPhase::lost)] = 1200s;
  CHECK(describe(longer) == "goodput 83.3% of 120.0 min: productive 100.0 min; lost to failures 20.0 min");
  longer.wall = 72000s;
  longer.by_phase[static_cast<size_t>(GoodputPhase::productive)] = 72000s;
  longer.by_phase[static_cast<size_t>(GoodputPhase::lost)] = 0s;
  CHECK(describe(longer) == "goodput 100.0% of 20.0 h: productive 20.0 h");
}

TEST_CASE("a group still running at the exit counts as it ran, without claiming unknown progress", "[goodput]") {
  Recorded r;
  r.g.attempt_started(0, t0);
  AttemptRecord a = record(0, t0);
  r.g.stop_requested(t0 + 3s);
  const GoodputTotals t = r.g.finish(t0 + 4s);
  CHECK(t[GoodputPhase::productive] == 3s);
  CHECK(t[GoodputPhase::teardown] == 1s);
  CHECK_FALSE(t.unknown_progress);
  CHECK(sum(t) == t.wall);
}
