// Command line + environment -> agent::Config, the way torchrun reads them
// (torch 1.13 and 2.x option union, PET_* fallbacks), with every value
// validated before anything starts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/environment.h"
#include "launcher/errors.h"
#include "launcher/parsed.h"

namespace cxxrun::launcher {

// `args` excludes argv[0]. Throws UsageError (NotBuiltYet for features that
// come later) with a one-line message; config is only meaningful when
// neither help nor version is set.
Parsed parse(const std::vector<std::string>& args, const Env& env);
// The same, with how a Slurm node name becomes an address (launcher/slurm.h)
// given: tests lay out clusters that do not exist.
Parsed parse(const std::vector<std::string>& args, const Env& env,
             const std::function<std::string(const std::string&)>& slurm_node_address);

std::string help_text();
std::string version_text();

}  // namespace cxxrun::launcher
