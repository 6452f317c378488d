// Runs a one-command job (launcher/fanout_plan.h): one --rsh per host, each
// starting that host's agent, on one event loop (Boost.Asio, inside
// fanout.cc only) that never blocks but on its own console:
//   - each agent's stdout and stderr come back line by line, each line
//     prefixed with its host ("[node2] ...") and written whole;
//   - the token goes first on each agent's stdin, then any signal the
//     launcher gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT), so every host stops
//     as one node does; a second one makes the agents kill their workers
//     now, a third kills the --rsh processes (their agents then see EOF);
//   - a host --rsh cannot reach is one line naming it and the command that
//     failed; the job is stopped when the host held the rendezvous store or
//     the hosts left cannot make --nnodes' minimum, and goes on otherwise;
//   - once told to stop, an agent has the plan's stop deadline, then its
//     --rsh is killed;
//   - the exit code is launcher/job_exit_code.h's, from every agent's.
#pragma once

#include "launcher/fanout_plan.h"

namespace cxxrun::launcher {

int run_fanout(const FanoutPlan& plan);

}  // namespace cxxrun::launcher
