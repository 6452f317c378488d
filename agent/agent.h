// The per-node agent: spawns the local worker group with the torchrun
// environment, watches it from one event loop, stops whole process trees and
// restarts the group on failure up to Config::max_restarts.
//
// Promises:
//  - every worker runs in its own session/process group and gets
//    PR_SET_PDEATHSIG; a guardian process kills everything the job started if
//    the agent itself dies, even by SIGKILL;
//  - on the first failure the other workers get SIGTERM, then SIGKILL after
//    Config::shutdown_timeout; the agent is a child subreaper so grandchildren
//    are found and killed too;
//  - every worker's exit status and last stderr lines reach the user.
#pragma once

#include "agent/config.h"

namespace cxxrun::agent {

// Meets the other nodes, then runs the job to completion. Returns the
// process exit code: agent/exit_codes.h has every code, agent/restart_policy.h
// every rule that picks one.
int run(const Config& config);

}  // namespace cxxrun::agent
