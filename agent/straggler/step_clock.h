// Seconds per step of each rank of this node, for the step signal
// (agent/straggler/detector.h), where the job has progress: a
// --progress-pattern line comes with its local rank (Workers::observe_lines),
// and each worker's heartbeat page holds the step it last reported
// (cxxrun.step(), agent/hang/watchdog.h). Both are counted on one clock per
// rank: a step number counts the steps since the last one seen, a line that
// names none counts one. Pure: times are given.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

namespace cxxrun::agent {

class StepClock {
 public:
  using Clock = std::chrono::steady_clock;

  // Local rank `local_rank` reported `step` (nullopt: one more step) at `now`.
  void step(int local_rank, std::optional<uint64_t> step, Clock::time_point now);
  // Each rank's seconds per step over the window that ends at `now`, which
  // lasted `window`: from its last step before the window to its last one
  // in it, divided by the steps between; for a rank that made none in the
  // whole window, the time since its last step (a lower bound). A rank that
  // never reported two steps has none. Starts the next window.
  std::map<int, double> window(Clock::time_point now, Clock::duration window);
  // A new attempt: steps start again.
  void reset() { ranks_.clear(); }

 private:
  struct Rank {
    std::optional<uint64_t> step;  // the highest step number seen
    Clock::time_point anchor{};    // the last step before the window (the first one ever, at first)
    Clock::time_point last{};      // the last step seen
    uint64_t steps = 0;            // steps since the anchor
    bool timed = false;            // two steps seen: a time between them
  };
  std::map<int, Rank> ranks_;
};

}  // namespace cxxrun::agent
