// Seconds per step of each rank (agent/straggler/step_clock.h) from step
// numbers and from lines that name none, on made-up times.
#include <catch2/catch.hpp>

#include "agent/straggler/step_clock.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

TEST_CASE("seconds per step from step numbers, polled pages seen again, and plain lines", "[straggler]") {
  StepClock clock;
  const auto t0 = StepClock::Clock::time_point{} + 100s;
  for (int i = 0; i <= 5; ++i) {
    clock.step(0, 10 + i, t0 + i * 1s);
    clock.step(0, 10 + i, t0 + i * 1s + 100ms);  // the page again: nothing new
    clock.step(1, std::nullopt, t0 + i * 2s);    // a line naming no step
  }
  clock.step(2, 7, t0);
  clock.step(2, 9, t0 + 4s);  // two steps in one report
  auto w = clock.window(t0 + 10s, 10s);
  CHECK(w.at(0) == Approx(1.0));
  CHECK(w.at(1) == Approx(2.0));
  CHECK(w.at(2) == Approx(2.0));
  // The next window: rank 0 goes on, rank 1 stops, rank 2 made none since t0+4s.
  for (int i = 6; i <= 10; ++i) clock.step(0, 10 + i, t0 + i * 1s + 5s);
  w = clock.window(t0 + 20s, 10s);
  CHECK(w.at(0) == Approx(2.0));  // from t0+5s (its last before) to t0+15s: 5 steps
  CHECK(w.at(1) == Approx(10.0));  // none since t0+10s: at least that
  CHECK(w.at(2) == Approx(16.0));
  StepClock once;
  once.step(0, 1, t0);
  CHECK(once.window(t0 + 10s, 5s).empty());  // one step: no time between steps
}
