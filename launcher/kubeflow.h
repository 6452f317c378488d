// The Kubeflow training operator's PyTorchJob with no glue. For a job with a
// Master replica and no elasticPolicy the operator sets PET_NNODES,
// PET_NODE_RANK and PET_NPROC_PER_NODE, but the master's address only as
// MASTER_ADDR/MASTER_PORT, which torchrun does not read: its --master-addr
// stays 127.0.0.1 and every node but the master waits for a store that is
// not there. cxxrun takes MASTER_ADDR (and MASTER_PORT) as --master-addr
// (--master-port) when all of these hold:
//   - the static backend across more than one node, not --standalone;
//   - neither --master-addr nor --rdzv-endpoint was given (nor PET_*);
//   - Slurm derived nothing (launcher/slurm.h);
//   - MASTER_ADDR is set and not empty.
// docs/torchrun-compat.md, "Kubernetes", lists what each operator sets.
#pragma once

#include <optional>
#include <string>

#include "launcher/environment.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Fills --master-addr/--master-port from MASTER_ADDR/MASTER_PORT as above
// and returns the one line that says so; nullopt when it does nothing.
std::optional<std::string> apply_master_env(RawOptions& raw, const Env& env);

}  // namespace cxxrun::launcher
