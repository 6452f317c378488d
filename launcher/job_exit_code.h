// The exit code of a job started on every host by one command (cxxrun
// --hostfile / --hosts): one code out of every agent's, by the exit-code
// contract (agent/exit_codes.h, docs/exit-codes.md "One command for every
// host"). The one home of that rule; pure, so it is tested case by case.
//
// In order, the first that applies:
//   1. an agent exited 242 (a node cannot kill its processes)     242
//   2. the launcher got a signal (Ctrl-C, SIGTERM, ...)             128 + that signal
//   3. the launcher stopped the job: a host could not be reached    1 (the job could not form)
//   4. the agents' codes, the highest ranked among them:
//        2 (bad input), 245 (final verdict), 241 (oom), 240 (hang), 244 (lost),
//        then any other code but 0, 1 and 243 (the program's own, 127,
//        128 + signal), the first host's in the host list first,
//        then 1 (a failed rendezvous, a spare released by a failed job)
//   5. an agent exited 0 (a spare released by success is one)        0
//      A node that stepped out (243), an agent whose host was lost (its
//      connection or its process ended without a code) or never reached,
//      is outvoted by the nodes that finished the job without it.
//   6. a node stepped out (243) and no other ended with a code       243
//   7. every agent was lost or unreachable                          244
#pragma once

#include <span>

namespace cxxrun::launcher {

struct HostOutcome {
  enum class Kind {
    exited,       // the agent ended and told its code
    lost,         // reached, then its connection or process ended without a code
    unreachable,  // --rsh never reached its agent
  };
  Kind kind = Kind::exited;
  int code = 0;  // Kind::exited only
};

// launcher_signal: the first signal the launcher got, 0 for none;
// stopped_unreachable: the launcher stopped the job because hosts could not
// be reached.
int job_exit_code(std::span<const HostOutcome> hosts, int launcher_signal, bool stopped_unreachable);

}  // namespace cxxrun::launcher
