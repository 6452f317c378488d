// Slurm with no glue. Inside an srun step (SLURM_JOB_ID and SLURM_STEP_ID
// set), when the user gave none of --nnodes, --rdzv-endpoint (with a host),
// --master-addr, --node-rank or --standalone, cxxrun fills in what a torchrun
// user writes by hand, from the step's own variables (docs/torchrun-compat.md,
// "Slurm"):
//   --nnodes          SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES
//   node rank         SLURM_NODEID (static: --node-rank; c10d: the key the
//                     rendezvous orders nodes by, RendezvousSettings::node_order)
//   --rdzv-endpoint   the first host of SLURM_STEP_NODELIST (else the job's)
//                     on port 29400, or the port of --rdzv-endpoint=:PORT
//   --rdzv-id         slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>
//   --nproc-per-node  the GPUs Slurm gave this node, where it gave any
//   --signals-to-handle  the default plus SIGUSR1 (srun --signal=USR1@N),
//                        forwarded to the workers only: it does not end the job
// Explicit flags (and their PET_* variables) always win; --no-slurm turns it
// off. One cxxrun task per node: a second one is refused.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "launcher/environment.h"
#include "launcher/errors.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Where a Slurm node name is reached: the name itself when it resolves,
// else the NodeAddr Slurm knows it by.
using NodeAddress = std::function<std::string(const std::string& node_name)>;
NodeAddress resolve_node_address();

// Fills the derived values into `raw` (each naming the variable it came
// from) and returns the one line that says what was derived; nullopt when
// not in a step, turned off, or the user chose. Throws UsageError naming
// the variable and the rule.
std::optional<std::string> apply_slurm(RawOptions& raw, const Env& env, const NodeAddress& address);

}  // namespace cxxrun::launcher
