// How a HealthSnapshot reads on the wire: the /healthz JSON body and the
// /metrics Prometheus text. Pure functions, so they are tested without a
// socket and the Asio translation unit stays small.
#pragma once

#include <string>

#include "agent/report/health_snapshot.h"

namespace cxxrun::agent {

// False for UNKNOWN, UNHEALTHY and FAILED, and once the node is unhealthy
// (a worker outlived SIGKILL): /healthz then answers 503 so a liveness
// probe notices a hung or finished-with-failure agent. INIT and STOPPED are
// a rendezvous or a restart in progress, which is healthy work.
bool reports_healthy(const HealthSnapshot& s);

// {"state": "HEALTHY", "run_id": ..., "role": ..., "group_rank": 0,
//  "group_world_size": 1, "restart_count": 0, "max_restarts": 3,
//  "node_healthy": true,
//  "workers": [{"local_rank": 0, "rank": 0, "pid": 42, "state": "running",
//               "seconds_since_heartbeat": 1.5 | null,
//               "cause": "oom-killed" | null, "cause_detail": "..." | null}]}
std::string health_json(const HealthSnapshot& s);

// Prometheus text exposition format 0.0.4; every metric has # HELP and
// # TYPE lines. Metric names:
//   cxxrun_agent_info{run_id,role,group_rank} 1
//   cxxrun_agent_state{state}                 1 for the current state, 0 for the others
//   cxxrun_group_rank, cxxrun_group_world_size
//   cxxrun_restart_count, cxxrun_max_restarts, cxxrun_remaining_restarts
//   cxxrun_workers_running
//   cxxrun_worker_running{local_rank,rank}    1 while that worker's process is alive
//   cxxrun_node_healthy                       0 once a worker outlived SIGKILL
//   cxxrun_worker_failures_total{cause}       failures since the agent started, per agent/forensics/death.h cause
//   cxxrun_phase_seconds{phase}         wall seconds per goodput phase (agent/progress/goodput.h)
//   cxxrun_goodput_ratio                      productive / wall seconds
//   cxxrun_rank_running_share{local_rank,rank}  share of the last straggler window the rank computed
//   cxxrun_rank_step_seconds{local_rank,rank}   its seconds per step in that window, where it reports steps
//   cxxrun_rank_straggler{local_rank,rank}      1 while the rank is named slower than its node's others
//   cxxrun_node_straggler                       1 while the job names this node slower than the others
//   cxxrun_worker_seconds_since_heartbeat{local_rank,rank}   only for workers with a heartbeat
std::string prometheus_text(const HealthSnapshot& s);

}  // namespace cxxrun::agent
