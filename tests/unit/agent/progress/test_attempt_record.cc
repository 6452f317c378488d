// An attempt's progress record (agent/progress/attempt_record.h): its
// arithmetic on made-up times, and the line a user reads.
#include <catch2/catch.hpp>

#include "agent/progress/attempt_record.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

AttemptRecord started_at(AttemptRecord::Clock::time_point t0, int attempt = 0) {
  AttemptRecord r;
  r.attempt = attempt;
  r.started = t0;
  return r;
}

}  // namespace

TEST_CASE("first progress, highest step and the rate between the first and highest step", "[progress]") {
  const auto t0 = AttemptRecord::Clock::time_point{} + 100s;
  AttemptRecord r = started_at(t0);
  r.progress(StepSource::output, std::nullopt, t0 + 3s);  // a match naming no step
  r.progress(StepSource::output, 10, t0 + 4s);
  r.progress(StepSource::output, 30, t0 + 8s);
  r.progress(StepSource::output, 20, t0 + 9s);  // lower: not the highest
  r.ended = t0 + 12s;
  REQUIRE(r.startup());
  CHECK(*r.startup() == 3s);
  REQUIRE(r.highest);
  CHECK(r.highest->step == 30u);
  CHECK(r.highest->source == StepSource::output);
  REQUIRE(r.steps_per_second());
  CHECK(*r.steps_per_second() == Approx(5.0));  // 20 steps in 4 s
  CHECK(r.duration(t0) == 12s);
  CHECK(describe(r) == "attempt 0: first progress 3.0 s after start; reached step 30 (5.0 steps/s)");
}

TEST_CASE("the earliest report is the first progress, whatever order it came in", "[progress]") {
  const auto t0 = AttemptRecord::Clock::time_point{} + 100s;
  AttemptRecord r = started_at(t0);
  r.progress(StepSource::output, 5, t0 + 2s);
  r.progress(StepSource::program, 4, t0 + 1500ms);  // read from the page later, written earlier
  CHECK(*r.startup() == 1500ms);
  CHECK(r.first_step->step == 4u);
  CHECK(r.highest->step == 5u);
  CHECK(*r.steps_per_second() == Approx(2.0));
}

TEST_CASE("no rate without two steps apart in time", "[progress]") {
  const auto t0 = AttemptRecord::Clock::time_point{} + 100s;
  AttemptRecord r = started_at(t0);
  r.progress(StepSource::program, 7, t0 + 1s);
  CHECK_FALSE(r.steps_per_second());
  r.progress(StepSource::program, 7, t0 + 2s);
  CHECK_FALSE(r.steps_per_second());
}

TEST_CASE("the last checkpoint, its step and its age at the end", "[progress]") {
  const auto t0 = AttemptRecord::Clock::time_point{} + 100s;
  AttemptRecord r = started_at(t0, 1);
  r.checkpoint("ckpt-10.pt", 10, t0 + 5s);
  r.checkpoint("ckpt-20.pt", 20, t0 + 10s);
  r.ended = t0 + 19s;
  CHECK(r.checkpoints == 2);
  REQUIRE(r.last_checkpoint);
  CHECK(r.last_checkpoint->step == 20u);
  CHECK(r.highest->source == StepSource::checkpoint);
  CHECK(*r.startup() == 5s);
  CHECK(describe(r) ==
        "attempt 1: first progress 5.0 s after start; reached step 20 (2.0 steps/s); last checkpoint step 20, "
        "9.0 s before the end");
  r.checkpoint("latest", std::nullopt, t0 + 18s);
  CHECK_THAT(describe(r), Catch::EndsWith("last checkpoint latest, 1.0 s before the end"));
}

TEST_CASE("an attempt without progress says how long it ran", "[progress]") {
  const auto t0 = AttemptRecord::Clock::time_point{} + 100s;
  AttemptRecord r = started_at(t0, 1);
  r.ended = t0 + 42s;
  CHECK_FALSE(r.startup());
  CHECK_FALSE(r.highest);
  CHECK(describe(r) == "attempt 1: no progress in 42.0 s");
}
