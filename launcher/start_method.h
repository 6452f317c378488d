// How Python workers start: --start-method (torchrun's spawn, fork or
// forkserver) and cxxrun's --preload. forkserver forks each Python worker
// from one interpreter that imported the preload list once (agent/warm/zygote.h,
// docs/forkserver.md); spawn and fork exec a fresh interpreter per worker,
// as torchrun does for a script. A native program always starts by exec.
#pragma once

#include <string>
#include <vector>

#include "agent/config.h"
#include "launcher/errors.h"
#include "launcher/program.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// What the forkserver imports when --preload is not given; each is skipped
// where it cannot be imported.
inline constexpr const char* kDefaultPreload = "torch,torch.distributed";

// Validates --start-method and --preload and fills config.forkserver.
// Throws UsageError naming the value and the rule.
void apply_start_method(const RawOptions& raw, const Program& program, agent::Config& config,
                        std::vector<std::string>& warnings);

}  // namespace cxxrun::launcher
