// Command line + environment -> agent::Config, the way torchrun reads them
// (torch 1.13 and 2.x option union, PET_* fallbacks), with every value
// validated before anything starts.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/config.h"
#include "launcher/errors.h"

namespace cxxrun::launcher {

// The launcher's view of the environment: tests pass their own instead of
// touching the real one.
using Env = std::map<std::string, std::string, std::less<>>;
Env current_environment();

struct Parsed {
  agent::Config config;
  // -h/--help before the program: print help_text() and exit 0.
  bool help = false;
  // --version: print version_text() and exit 0.
  bool version = false;
  // For the WARNING log (torchrun's OMP banner, ...).
  std::vector<std::string> warnings;
  // For the INFO log (what nproc resolved to, the standalone rendezvous).
  std::vector<std::string> notes;
  // cxxrun's own log level from LOGLEVEL: DEBUG, INFO (default), WARNING,
  // ERROR or CRITICAL.
  std::string log_level = "INFO";
};

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
