// What the supervisor, the hang watchdog, the fault injector and the reporter
// need of one node's workers: the seam in front of WorkerGroup (ninja's
// CommandRunner is the model). WorkerGroup (agent/workers/worker_group.h) starts real
// processes; tests/unit/agent/test_supervisor.cc drives the supervisor's phase
// sequence through a fake that starts none.
//
// The contract every implementation keeps: calls come on the supervisor's
// loop, and so do the Listener's callbacks, never from inside the call that
// causes them (post them); after stop(), on_group_stopped() comes exactly
// once, when nothing of the attempt runs any more.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/forensics/failure.h"
#include "agent/process/worker_env_writer.h"

namespace cxxrun::agent {

// One worker of the current attempt, as every user of the seam sees it.
struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;  // -1: it could not be started
  bool running = false;
  // Set while a signal has it stopped (SIGSTOP, SIGTSTP, ...), until SIGCONT.
  std::optional<std::chrono::system_clock::time_point> paused_since;
  int status = 0;  // waitpid status once it exited
  long long peak_rss = -1;  // bytes, its peak resident memory once it exited (wait4)
  bool peak_rss_of_children = false;  // it had reaped children: that peak may be one of theirs
};

class Workers {
 public:
  class Listener {
   public:
    virtual void on_worker_started(const Worker& w) = 0;
    virtual void on_worker_exited(const Worker& w) = 0;
    // A signal stopped the worker, or SIGCONT resumed it (w.paused_since).
    virtual void on_worker_paused(const Worker& w) = 0;
    // A worker failed on its own while the group ran.
    virtual void on_worker_failed(const Failure& f) = 0;
    // While stopping after a failure: a worker that had failed before the
    // stop began (its error file is older), so it counts too.
    virtual void on_earlier_failure(const Failure& f) = 0;
    // Every worker exited 0.
    virtual void on_group_succeeded() = 0;
    // stop() is complete: every worker reaped (or given up on as
    // unkillable), strays killed, pipes drained.
    virtual void on_group_stopped() = 0;

   protected:
    ~Listener() = default;
  };
  // Adds per-worker variables (hang detection's) to a worker's environment.
  using EnvHook = std::function<void(EnvMap& env, int local_rank)>;
  // Sees every line a worker writes to stdout or stderr, without its
  // console prefix ('\r' ends a line too), on the loop as it is read.
  using LineObserver = std::function<void(int local_rank, std::string_view line)>;

  virtual ~Workers() = default;

  // Starts config.nproc_per_node workers for `attempt`; `placement` is this
  // node's place in the current round. A worker that cannot be executed is
  // a failure (exit code 127), reported through the listener.
  virtual void start(const Config& config, const rendezvous::Assignment& placement, int attempt,
                     const EnvHook& env_hook) = 0;
  // From the next start() on, every worker's lines also go to `observer`
  // (--progress-pattern); none by default, so output costs no more.
  virtual void observe_lines(LineObserver observer) = 0;
  // Takes the whole attempt down: `sig` first, SIGKILL after the grace.
  // `failing`: exits during the stop are still failures.
  virtual void stop(int sig, bool failing) = 0;
  // SIGKILL now (a second SIGINT, or the grace ran out).
  virtual void escalate() = 0;
  // Forwards `sig` to every running worker.
  virtual void signal_all(int sig) = 0;
  // Fault injection: sends `sig` to the worker with global rank `rank`;
  // false if none runs. Its end is reported as cxxrun's kill.
  virtual bool signal_rank(int rank, int sig) = 0;
  // Every other signal cxxrun sends on its own initiative to a process of
  // this attempt (a worker, or one of its children): the end of a worker
  // sent one is reported as killed by `by`, for `why`. A worker still alive
  // Config::kill_timeout after cxxrun's SIGKILL is reported unkillable.
  // `stack`: what the worker was doing (a hang's stack), shown as its
  // failure's traceback. `no_root_cause`: not empty when the worker is
  // killed only to stop the job and no rank can be named as the cause
  // (Failure::no_root_cause).
  virtual void kill_process(pid_t pid, int sig, Killer by, const std::string& why, const std::string& stack = "",
                            const std::vector<std::string>& no_root_cause = {}) = 0;
  // Reaps every exited child (SIGCHLD); `other` gets children that are not
  // workers.
  virtual void reap(const std::function<void(pid_t pid)>& other) = 0;
  // Whether the hang watchdog already sent local rank `local_rank` a kill.
  virtual bool hung(int local_rank) const = 0;

  virtual int running() const = 0;
  // Whether a running worker is stopped by a signal.
  virtual bool paused() const = 0;
  virtual const std::vector<std::unique_ptr<Worker>>& workers() const = 0;
  // This attempt's failures; ordered root cause first once it stopped.
  virtual const std::vector<Failure>& failures() const = 0;
  // Every live process of this attempt: its workers and all they started,
  // wherever they went (the attempt's cgroup; without one, the agent's
  // descendants and whatever carries the attempt's token). Not the token
  // alone: where the kernel refuses a forked worker its own /proc view
  // (docs/forkserver.md), /proc shows it with the zygote's environment.
  virtual std::vector<pid_t> attempt_pids() const = 0;
  // Bytes local rank `local_rank` wrote to stdout and stderr in this
  // attempt so far: a sign of progress (agent/hang/progress_monitor.h).
  virtual unsigned long long output_bytes(int local_rank) const = 0;
  // The node's logger, named by its group rank in the current round.
  virtual const std::shared_ptr<spdlog::logger>& log() const = 0;
};

}  // namespace cxxrun::agent
