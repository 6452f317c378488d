// --hang-timeout: a job is hung when no worker of this node has made
// progress for that long, where progress is what the agent sees without the
// worker's help: CPU time used by the worker's process tree, bytes on its
// stdout/stderr, and heartbeats when it sends them. The one judge of that
// rule; the hang watchdog samples and acts (agent/hang/watchdog.h).
//
// What it cannot see (docs/hangs.md): a worker spinning while it waits (a
// busy-polling collective, a GPU kernel a hung NCCL call keeps the CPU thread
// polling for) burns CPU and counts as progress; then only a heartbeat or a
// section (--heartbeat-timeout, --section-timeout) or NCCL's own timeout
// catches it. A worker that is slow but never idle for the whole timeout is
// not hung by this rule.
#pragma once

#include <chrono>
#include <map>
#include <optional>

namespace cxxrun::agent {

class ProgressMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  // What the agent saw of one worker at a moment: cumulative counters.
  struct Sample {
    std::chrono::nanoseconds cpu{0};  // CPU time of the worker and its live children
    unsigned long long output_bytes = 0;
    unsigned long long beats = 0;
  };

  // CPU used at less than `cpu_floor` per second since the worker last
  // progressed is idling (a timer thread, a poll), not progress. Judged over
  // that whole span, not per sample: the kernel counts CPU time in ticks
  // (10 ms), so an idle process shows a tick now and then.
  explicit ProgressMonitor(std::chrono::milliseconds timeout,
                           std::chrono::microseconds cpu_floor = std::chrono::microseconds(5000));

  // A new attempt: every worker starts with progress now.
  void reset(Clock::time_point now);
  // Records a sample of local rank `local_rank` taken at `now`.
  void observe(int local_rank, const Sample& s, Clock::time_point now);
  // A worker that ended: it no longer holds the job back, nor speaks for it.
  void forget(int local_rank);

  struct Verdict {
    std::chrono::milliseconds idle{0};  // how long the most recent progress is ago
  };
  // The job is hung at `now` when it has workers and none made progress for
  // the timeout.
  std::optional<Verdict> check(Clock::time_point now) const;

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Seen {
    Sample last;
    std::chrono::nanoseconds cpu_at_progress{0};
    Clock::time_point progressed;
  };
  std::chrono::milliseconds timeout_;
  std::chrono::microseconds cpu_floor_;
  Clock::time_point started_{};
  std::map<int, Seen> seen_;
};

}  // namespace cxxrun::agent
