// One attempt's progress: the record every later judgement of an attempt
// reads (the log line at its end, the event log's ATTEMPT_PROGRESS event).
// Pure arithmetic over what the tracker (agent/progress/progress_tracker.h)
// feeds it, with the times given, so tests drive it with made-up clocks.
//
// Progress is any of: an output line matching --progress-pattern, a
// checkpoint appearing in --checkpoint-dir, a step the program reported
// (cxxrun.step(n), cxxrun_step()). Each may name a step; the highest named
// is the attempt's, whatever its source (a checkpoint named step 300 means
// step 300 was reached).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

enum class StepSource { output, program, checkpoint };
// "output", "program", "checkpoint": the event log's words.
std::string_view step_source_name(StepSource s);

struct AttemptRecord {
  using Clock = std::chrono::steady_clock;

  struct Step {
    uint64_t step = 0;
    Clock::time_point at;
    StepSource source = StepSource::output;
  };
  struct Checkpoint {
    std::string name;
    std::optional<uint64_t> step;
    Clock::time_point at;
  };

  int attempt = 0;
  Clock::time_point started;  // the workers were spawned
  std::optional<Clock::time_point> ended;
  std::optional<Clock::time_point> first_progress;
  std::optional<Step> first_step;  // the earliest step seen: where the rate counts from
  std::optional<Step> highest;     // the highest step seen (the first time it was seen)
  std::optional<Checkpoint> last_checkpoint;
  int checkpoints = 0;

  // Progress at `at`, naming `step` or none. Reports may come out of order
  // (the program's step is read a moment after it was written): the
  // earliest time counts as the first progress.
  void progress(StepSource source, std::optional<uint64_t> step, Clock::time_point at);
  // A checkpoint appeared (it is progress too).
  void checkpoint(std::string name, std::optional<uint64_t> step, Clock::time_point at);

  // Spawn to first progress: the attempt's startup cost.
  std::optional<std::chrono::nanoseconds> startup() const;
  // Steps per second from the first step seen to the highest, when both
  // differ in step and time.
  std::optional<double> steps_per_second() const;
  // How long the attempt ran: to its end, or to `now` while it runs.
  std::chrono::nanoseconds duration(Clock::time_point now) const;
};

// The record in a user's words, for the line the agent logs when the
// attempt ends: "attempt 0: first progress 3.1 s after start; reached step
// 30 (6.4 steps/s); last checkpoint step 20, 9.0 s before the end", or
// "attempt 1: no progress in 42.0 s".
std::string describe(const AttemptRecord& r);

}  // namespace cxxrun::agent
