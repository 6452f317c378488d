// Whether this node is fit to run the job's workers, asked before every
// round: the first join and every restart. A node that fails a check does
// not join: it steps out with exit_code::node_unhealthy, names itself in the
// event log and --exclude-file, and a waiting spare takes its place.
//
// The checks, each bounded and each one line in the log:
//   command     --health-check (agent/health/host_checks.h)
//   path P      --health-path, writable with free space (agent/health/host_checks.h)
//   rdma        every RDMA port active, where the host has any
//   gpu-*       every visible GPU answers, no pending recovery action,
//               retired page, row-remap failure, uncorrected ECC error or
//               new Xid, where NVML loads (agent/health/gpu_health.h)
//   gpu-memory-drained  after an attempt: the last workers' GPU memory
//               freed (bounded wait, kGpuMemoryDrainLimit), before the next spawn
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/health/host_checks.h"

namespace spdlog {
class logger;
}

namespace cxxrun::agent {

class GpuHealth;

// How long a --health-path may take to answer.
inline constexpr std::chrono::seconds kPathCheckLimit{10};

class NodeHealth {
 public:
  // Opens NVML where the host has it, and says in one line what will be
  // checked before each round.
  explicit NodeHealth(const Config& config);
  ~NodeHealth();  // waits for a check in flight (each is bounded)
  NodeHealth(const NodeHealth&) = delete;
  NodeHealth& operator=(const NodeHealth&) = delete;

  bool empty() const { return empty_; }
  // Every check, blocking. `after_attempt`: an attempt's workers just ended,
  // so their GPU memory must be freed first.
  std::vector<CheckResult> check(bool after_attempt);
  // The same on a thread of its own; `post` hands the continuation to the
  // agent's loop.
  using Post = std::function<void(std::function<void()>)>;
  void check_async(bool after_attempt, Post post, std::function<void(std::vector<CheckResult>)> then);
  // Waits for a check_async in flight (bounded: every check is).
  void join();
  // Any thread: the check in flight ends at once, whatever its command
  // started killed, and no check runs any more (each returns `stopped`).
  // The agent calls it when it exits during a check (a signal).
  void stop() { stop_.stop(); }
  // check(false) on a thread of its own, for the agent's first round, when
  // no event loop handles signals yet: the calling thread blocks `signals`
  // meanwhile and waits for them. One of them, unless `only_forwarded`
  // (meant for workers, and there are none yet), stops the checks (stop())
  // and comes back in `received`, with the results so far; 0 when none
  // came. The mask is the caller's again on return; block them before any
  // thread starts (NVML's), or one that does not block them takes them.
  std::vector<CheckResult> check_or_signal(const std::vector<int>& signals, const std::set<int>& only_forwarded,
                                           int& received);
  // The last verdict of each check, for /healthz and /metrics. Any thread.
  std::vector<CheckResult> last() const;

 private:
  const HealthChecks options_;
  std::unique_ptr<GpuHealth> gpus_;
  bool empty_ = true;
  mutable std::mutex mu_;
  std::vector<CheckResult> last_;
  CheckStop stop_;
  std::thread thread_;
};

// The first check that failed, or nullptr.
const CheckResult* first_failure(const std::vector<CheckResult>& results);

// The one line a node that steps out says: "health check 'rdma' failed:
// RDMA port mlx5_0/1 is DOWN (Polling)".
std::string failure_line(const CheckResult& failed);

// Appends this host's name to --exclude-file (one line, O_APPEND under a
// lock, so the nodes of a job may share one file), ending first a last line
// left without its end. Made 0600; a symbolic link is followed only when
// this user (or root) made it, and only a regular file is written. A file
// that cannot be written is a warning, never a reason to hide the verdict.
void exclude_this_node(const std::string& file);

// The one act of a node that steps out, before its first round (`joined`
// false: it does not join) or at a restart (true: it steps out): one error
// line in `log`, then `record` (the NODE_UNHEALTHY event, written the way
// the caller writes events), then --exclude-file. Returns failure_line, for
// the caller to give the rendezvous (decline before joining, step_out after)
// so that the other nodes stop waiting for this one.
std::string step_out_of_job(spdlog::logger& log, const Config& config, const CheckResult& failed, bool joined,
                            const std::function<void(const std::string& check, const std::string& line)>& record);

}  // namespace cxxrun::agent
