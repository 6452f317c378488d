// Progress tracked per attempt (docs/restarts.md): the one home of the
// current attempt's AttemptRecord and of what feeds it. Passive: the
// supervisor's loop calls it (attempt start and end, each worker spawned,
// each output line when a pattern is set), and a timer on that loop polls
// the program's reported step and the checkpoint directory. Nothing here
// blocks but one readdir of one directory a second.
//
// Tracked when any source can speak: --progress-pattern, --checkpoint-dir,
// or the program reporting a step (every worker has a heartbeat page,
// agent/hang/watchdog.h). Without any of these the attempt's end says
// nothing, as before.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/config.h"
#include "agent/progress/attempt_record.h"

namespace cxxrun::agent {

class CheckpointDir;
class ProgressPattern;

class ProgressTracker {
 public:
  using Clock = std::chrono::steady_clock;
  // The highest step any worker of the attempt reported through its
  // heartbeat page, and how long ago it reported it; nullopt before any
  // report (HangWatchdog::highest_step, agent/hang/watchdog.h).
  using StepProbe = std::function<std::optional<std::pair<uint64_t, std::chrono::nanoseconds>>()>;

  // Throws std::invalid_argument for a pattern the launcher should have
  // refused (agent/progress/progress_pattern.h).
  ProgressTracker(boost::asio::io_context& io, const Config& config, StepProbe probe);
  ~ProgressTracker();
  ProgressTracker(const ProgressTracker&) = delete;
  ProgressTracker& operator=(const ProgressTracker&) = delete;

  // Whether output lines are looked at (a pattern is set): the supervisor
  // gives the worker group a line observer only then.
  bool watches_output() const { return pattern_ != nullptr; }
  // One worker output line, without its console prefix.
  void line(std::string_view line);

  void attempt_started(int attempt);
  // A worker of the attempt was spawned: the first one starts its clock.
  void worker_started();
  // The attempt's group stopped: its record, with the last poll's findings,
  // or nullopt when progress is not tracked.
  std::optional<AttemptRecord> attempt_ended();
  // The running attempt's record so far (what the last poll found), or the
  // last one's once it ended; nullptr before the first attempt or when
  // progress is not tracked. Goodput splits the attempt's time from it
  // (agent/progress/goodput.h).
  const AttemptRecord* record() const;

 private:
  void tick();
  void poll(bool checkpoints);

  StepProbe probe_;
  std::unique_ptr<ProgressPattern> pattern_;
  std::unique_ptr<CheckpointDir> checkpoints_;
  boost::asio::steady_timer timer_;
  AttemptRecord record_;
  bool running_ = false;
  bool spawned_ = false;
  bool step_reported_ = false;  // the program reported a step in some attempt
  int ticks_ = 0;
};

}  // namespace cxxrun::agent
