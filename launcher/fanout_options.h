// Where the launcher decides what `cxxrun --hostfile` / `--hosts` runs on
// each host (launcher/fanout_plan.h, docs/multi-host.md): the user's options
// (their PET_* values written out as flags, since the remote login has its
// own environment), --nnodes from the hosts, the c10d rendezvous on the first
// host, a fresh run id, each host's slots, and the token that travels on
// stdin.
#pragma once

#include <string>

#include "launcher/fanout_plan.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Whether the command line asks for a one-command job (--hostfile, --hosts
// or their PET_* variables).
bool wants_fanout(const RawOptions& raw);

// `self`: the path the remote hosts run unless --remote-cxxrun says. Throws
// UsageError (exit 2) for a bad host list, --rsh, or options that cannot be
// spread over hosts (--standalone, the static backend, --from-launcher).
FanoutPlan plan_fanout(const RawOptions& raw, const std::string& self);

}  // namespace cxxrun::launcher
