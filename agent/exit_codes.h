// The one home of cxxrun's exit codes: the agent ends with one of these and
// the launcher (bad input, internal errors) too. The README's exit-code
// table is their contract; which one a job gets is decided in
// agent/restart_policy.h.
//   every worker exited 0                            0
//   a worker failed, no restarts left                 its own code, or 128 + signal
//   a worker could not be executed                   127 (its failure's code)
//   a worker hung, no restarts left                  137 (it was SIGKILLed)
//   the agent got SIGINT/SIGTERM/SIGHUP/SIGQUIT      128 + that signal
//   bad command line or environment                  2
//   rendezvous failed / too few nodes / store lost   1
//   a spare released because the job succeeded      0
//   a spare released because the job failed         1
#pragma once

namespace cxxrun::agent::exit_code {

constexpr int success = 0;
constexpr int usage = 2;
constexpr int rendezvous_failed = 1;
constexpr int lost = 1;  // too few nodes left, or the rendezvous store lost
constexpr int not_executable = 127;
constexpr int spare_released = 0;
constexpr int unknown_failure = 1;  // a failure whose own code is unknown
constexpr int internal_error = 1;
// What a shell reports for a process a signal ended, and what the agent
// exits with when a signal ends it: written here only.
constexpr int signalled(int sig) { return 128 + sig; }

}  // namespace cxxrun::agent::exit_code
