// What a parse of the command line hands main (launcher/options.h): the
// agent's Config, or a request for help or the version, and the lines to log.
// Its own header, so the stages below the parse (launcher/raw_options.h's
// build_config) can return it without the parse's header.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/config.h"
#include "launcher/fanout_plan.h"

namespace cxxrun::launcher {

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
  // --hostfile / --hosts: no agent here; main runs this plan
  // (launcher/fanout.h) and config is unset.
  std::optional<FanoutPlan> fanout;
  // --from-launcher: this agent was started by one (launcher/launcher_link.h);
  // main reads the token from stdin before the agent runs.
  bool from_launcher = false;
};

}  // namespace cxxrun::launcher
