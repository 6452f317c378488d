// What the agent shows about itself on /healthz and /metrics: a plain value
// the supervisor fills on its own thread when the health server asks, so the
// server never reaches into the supervisor's state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/straggler/straggler_news.h"

namespace cxxrun::agent {

// torchrun's WorkerState (docs/torchrun-compat.md §10.1), kept with its spelling so
// dashboards built for torchelastic read the same words.
enum class GroupState { unknown, init, healthy, unhealthy, stopped, succeeded, failed };

inline constexpr GroupState kAllGroupStates[] = {GroupState::unknown,   GroupState::init,   GroupState::healthy,
                                                 GroupState::unhealthy, GroupState::stopped, GroupState::succeeded,
                                                 GroupState::failed};

inline std::string_view group_state_name(GroupState s) {
  switch (s) {
    case GroupState::init: return "INIT";
    case GroupState::healthy: return "HEALTHY";
    case GroupState::unhealthy: return "UNHEALTHY";
    case GroupState::stopped: return "STOPPED";
    case GroupState::succeeded: return "SUCCEEDED";
    case GroupState::failed: return "FAILED";
    case GroupState::unknown: break;
  }
  return "UNKNOWN";
}

// One worker process as the agent last saw it. paused: stopped by a signal
// (SIGSTOP, SIGTSTP, ...) until a SIGCONT; stopped: stopped by the agent.
enum class WorkerRunState { running, paused, succeeded, failed, stopped };

inline std::string_view worker_run_state_name(WorkerRunState s) {
  switch (s) {
    case WorkerRunState::running: return "running";
    case WorkerRunState::paused: return "paused";
    case WorkerRunState::succeeded: return "succeeded";
    case WorkerRunState::failed: return "failed";
    case WorkerRunState::stopped: break;
  }
  return "stopped";
}

struct WorkerHealth {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;  // 0: never started (exec failed)
  WorkerRunState state = WorkerRunState::running;
  // Age of the worker's last heartbeat; nullopt when heartbeats are off or
  // none has arrived yet (shown as null, and left out of /metrics).
  std::optional<double> seconds_since_heartbeat;
  // How it ended when it failed (agent/forensics/death.h): "oom-killed", ... and the
  // evidence in one line; empty while it runs or when it did not fail.
  std::string cause;
  std::string cause_detail;
};

// The last hang verdict (agent/hang/watchdog.h), for /healthz.
struct HangHealth {
  std::string what;
  std::string picture;  // which rank stands apart
  std::string bundle;   // where every rank's stack went
  int rank = -1;        // the rank killed for it
  std::string stack;    // its stack
};

// One health check's last verdict (agent/health/node_health.h).
struct CheckHealth {
  std::string name;
  bool healthy = true;
  std::string detail;
  double seconds = 0;  // how long it took
};

struct HealthSnapshot {
  GroupState state = GroupState::unknown;
  std::string run_id;
  std::string role;
  int group_rank = 0;
  int group_world_size = 1;
  int restart_count = 0;  // restarts already made (TORCHELASTIC_RESTART_COUNT)
  int max_restarts = 0;
  // How long the rendezvous store has been unreachable while the workers go
  // on (a replicated store without quorum); nullopt while it answers.
  std::optional<double> rendezvous_unreachable_seconds;
  // False once a worker outlived SIGKILL: this node needs an admin.
  bool node_healthy = true;
  std::optional<HangHealth> last_hang;
  // The node's health checks before the last round (none: no checks).
  std::vector<CheckHealth> checks;
  // Failed workers since the agent started, by cause name (every cause
  // listed, 0 where none).
  std::vector<std::pair<std::string, int>> failures_by_cause;
  // Seconds of this node's wall time per goodput phase, every phase listed
  // (agent/progress/goodput.h), the running attempt counted provisionally;
  // and productive / wall. Empty and nullopt: not accounted.
  std::vector<std::pair<std::string, double>> phase_seconds;
  std::optional<double> goodput_ratio;
  // Each rank's last straggler window and whether the job names this node
  // (agent/straggler/straggler_watch.h); no ranks while nothing is sampled.
  SpeedView speeds;
  std::vector<WorkerHealth> workers;
};

}  // namespace cxxrun::agent
