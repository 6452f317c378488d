// One node's worker group for one attempt at a time: spawns the workers with
// the torchrun environment, reads their output pipes, reaps them, and stops
// the whole group (SIGTERM, SIGKILL after the grace, then every stray process
// that carries the attempt's token). A passive object: the supervisor's
// event loop drives it and it reports through Listener, on that loop.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/forensics/failure.h"
#include "agent/workers/filtered_log.h"
#include "agent/workers/kill_ledger.h"
#include "agent/workers/output.h"
#include "agent/workers/paused_workers.h"
#include "agent/process/spawn.h"
#include "agent/workers/warm_start.h"
#include "agent/process/worker_env_writer.h"
#include "agent/workers/worker_pipe.h"
#include "agent/workers/workers.h"

namespace cxxrun::agent {

class JobCgroup;
class LogDir;
class Postmortem;
class Forkserver;

// The real Workers: processes, pipes, cgroups (agent/workers/workers.h has the
// contract).
class WorkerGroup final : public Workers {
 public:
  // `cgroup`: where the job's processes live (nullptr: none; then the
  // agent's descendants are the job's, less `guardian` and the zygote).
  // `forkserver`: Python workers are forked from its zygote where it can
  // (nullptr: every worker starts by exec; agent/workers/warm_start.h). `postmortem`: the kernel's evidence on
  // each failed worker (nullptr: only its exit status).
  WorkerGroup(boost::asio::io_context& io, LogDir& logs, const std::string& job_token, JobCgroup* cgroup,
              pid_t guardian, Forkserver* forkserver, Postmortem* postmortem, Listener& listener);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts config.nproc_per_node workers for `attempt`. A worker that cannot
  // be executed is a failure (exit code 127), reported from the loop. While
  // the zygote still preloads, the workers start once it is ready (or given
  // up, Zygote::kPreloadDeadline).
  // `placement` is this node's place in the current round.
  void start(const Config& config, const rendezvous::Assignment& placement, int attempt,
             const EnvHook& env_hook) override;
  void observe_lines(LineObserver observer) override { observer_ = std::move(observer); }
  // The node's logger, named by its group rank in the current round.
  const std::shared_ptr<spdlog::logger>& log() const override { return log_; }
  // Reaps every exited child; `other` gets children that are not workers.
  void reap(const std::function<void(pid_t pid)>& other) override;
  // Signals every worker's process group and everything carrying this
  // attempt's token; SIGKILL after the grace. `failing`: exits during the
  // stop are still failures (a crash's victims may be reaped before it).
  void stop(int sig, bool failing) override;
  // SIGKILL now (a second SIGINT, or the grace ran out).
  void escalate() override;
  // Forwards `sig` to every running worker's process group.
  void signal_all(int sig) override;
  // Fault injection: sends `sig` to the worker with global rank `rank`.
  bool signal_rank(int rank, int sig) override;
  void kill_process(pid_t pid, int sig, Killer by, const std::string& why, const std::string& stack = "",
                    const std::vector<std::string>& no_root_cause = {}) override;
  bool hung(int local_rank) const override;

  int running() const override;
  // Whether a running worker is stopped by a signal.
  bool paused() const override;
  bool stopping() const { return stopping_; }
  const std::vector<std::unique_ptr<Worker>>& workers() const override { return workers_; }
  // This attempt's failures; ordered root cause first once it stopped.
  const std::vector<Failure>& failures() const override { return failures_; }
  std::vector<pid_t> attempt_pids() const override;
  unsigned long long output_bytes(int local_rank) const override;

 private:
  // "CXXRUN_JOB_TOKEN=<job>:<attempt>": in the environment of every process
  // of this attempt that was exec'd.
  std::string attempt_token() const;
  void start_workers();
  // A worker forked, its exec not yet confirmed: the group forks every
  // worker before it waits for the first exec (agent/process/spawn.h).
  struct Starting;
  Starting begin_worker(int local_rank);
  // False when it did not start; its failure is recorded when `record`.
  bool finish_worker(Starting& s, bool record);
  void record_start_failure(std::unique_ptr<Worker> w, const std::string& what);
  std::unique_ptr<FilteredLog> filtered_log(const std::vector<std::string>& filters, const char* name);
  // A started worker's stdout and stderr.
  struct Pipes {
    WorkerPipe out, err;
  };
  Pipes* pipes_of(const Worker& w);
  void open_pipe(Worker& w, WorkerPipe& p, int fd, int console, Std which, const char* file);
  void on_exit(Worker& w, int status);
  void on_pause(Worker& w, int status);
  // Every kMemorySample, each running worker's own peak memory, for the
  // postmortem.
  void sample_memory();
  void arm_drain_limit();
  // Signals every process of the attempt that is not a worker, wherever it
  // went; returns how many.
  int signal_strays(int sig);
  // After cxxrun's SIGKILL to `pid`: Config::kill_timeout to die.
  void watch_kill(pid_t pid);
  void give_up_on(Worker& w);
  void check_stopped();

  boost::asio::io_context& io_;
  LogDir& logs_;
  const std::string token_;
  JobCgroup* const cgroup_;
  const pid_t guardian_;
  Postmortem* const postmortem_;
  Listener& listener_;
  const EnvMap base_env_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer memory_timer_;
  std::shared_ptr<spdlog::logger> log_;
  Config c_;
  rendezvous::Assignment placement_;
  int attempt_ = 0;
  EnvHook env_hook_;
  LineObserver observer_;
  CgroupTarget target_;  // the attempt's cgroup, where there is one
  std::array<int, 2> gate_{-1, -1};  // the start gate while a group forks (agent/process/spawn.h)
  WarmStart warm_;
  // --duplicate-*-filters for this attempt; before workers_, whose sinks use them.
  std::unique_ptr<FilteredLog> filtered_out_;
  std::unique_ptr<FilteredLog> filtered_err_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::map<int, std::unique_ptr<Pipes>> pipes_;  // by local rank
  std::vector<Failure> failures_;
  KillLedger kills_;
  PausedWorkers paused_;  // workers a signal stopped, and the reminder while only they remain
  int open_pipes_ = 0;
  bool stopping_ = false;
  bool failing_ = false;
  bool escalated_ = false;
  bool strays_killed_ = false;
  // When this attempt's stop began: error files written before it belong to
  // failures, not to workers reacting to our signal.
  std::chrono::system_clock::time_point stop_started_;
};

}  // namespace cxxrun::agent
