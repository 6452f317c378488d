// The environment variables a worker is started with: the agent writes them
// (agent/process/worker_env_writer.h), the worker runtime reads them
// (worker_runtime/worker_env_reader.h). One list, so the two sides cannot
// disagree on a name. torchrun's own variables are described in
// docs/torchrun-compat.md §3; the CXXRUN_ ones are cxxrun's.
#pragma once

#include "common/heartbeat_layout.h"

namespace cxxrun::env {

// Where the worker sits in the job.
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleName[] = "ROLE_NAME";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";

// Where the workers' store is (rendezvous/worker_store.h), and who serves it:
// "True" when the agent does (Python's str(bool): torch compares with it).
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kUseAgentStore[] = "TORCHELASTIC_USE_AGENT_STORE";

// The attempt, and what the worker reports back.
inline constexpr char kRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kRunId[] = "TORCHELASTIC_RUN_ID";
inline constexpr char kErrorFile[] = "TORCHELASTIC_ERROR_FILE";
inline constexpr char kNcclAsyncErrorHandling[] = "TORCH_NCCL_ASYNC_ERROR_HANDLING";

// Hang detection: the worker's heartbeat page (common/heartbeat_layout.h)
// and torchrun's file-timer FIFO.
inline constexpr char kHeartbeatFile[] = CXXRUN_HEARTBEAT_ENV;
inline constexpr char kTimerFile[] = "TORCHELASTIC_TIMER_FILE";
// Stacks at a hang (agent/hang/stack_dump.h): where cxxrun's Python hook writes a
// worker's dumps, and the signal it registers them for.
inline constexpr char kStackFile[] = "CXXRUN_STACK_FILE";
inline constexpr char kStackSignal[] = "CXXRUN_STACK_SIGNAL";

// Carried by every process of a job, inherited by its descendants: how the
// agent finds them all (agent/process/process_tree.h). Value "<job>:<attempt>".
inline constexpr char kJobToken[] = "CXXRUN_JOB_TOKEN";

}  // namespace cxxrun::env
