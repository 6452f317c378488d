// The one home of cxxrun's exit codes: the agent ends with one of these and
// the launcher (bad input, internal errors) too. docs/exit-codes.md and the
// README's table are their contract for users and schedulers; which one a
// job gets is decided in agent/restart_policy.h, from the cause of each
// ended worker (agent/forensics/death.h).
//
// A user's own failure passes through (its code, or 128 + signal, as a shell
// reports it); causes outside the user's program get codes of their own, in
// a block no shell, signal or sysexits code uses (240-245), so a Kubernetes
// podFailurePolicy or a Slurm requeue script can tell "needs more memory"
// from "hung, retry" from "this node is bad" without reading logs.
//   every worker exited 0                            0
//   a worker failed, no restarts left                 its own code, or 128 + signal
//   a worker could not be executed                   127 (its failure's code)
//   the agent got SIGINT/SIGTERM/SIGHUP/SIGQUIT      128 + that signal
//   bad command line or environment                  2
//   rendezvous failed (join, timeout, closed)        1
//   a spare released because the job succeeded      0
//   a spare released because the job failed         1
//   a worker hung and cxxrun killed it               240
//   a worker was killed by the OOM killer            241
//   a worker survived SIGKILL (D state)              242 (wins over every other code)
//   the node failed a health check before a round    243 (it stepped out for a spare)
//   too few nodes left, or the rendezvous store lost 244
//   failures repeat without progress: stopped early 245 (agent/verdict/judge.h)
#pragma once

namespace cxxrun::agent::exit_code {

constexpr int success = 0;
constexpr int usage = 2;
constexpr int rendezvous_failed = 1;
constexpr int not_executable = 127;
constexpr int spare_released = 0;
constexpr int unknown_failure = 1;  // a failure whose own code is unknown
constexpr int internal_error = 1;
// Infrastructure: not the user's program.
constexpr int hang = 240;
constexpr int oom = 241;
constexpr int unkillable = 242;
constexpr int node_unhealthy = 243;  // agent/health/node_health.h
constexpr int lost = 244;  // too few nodes left, or the rendezvous store lost
// Stopped before --max-restarts was spent: the same root cause ended
// attempts in a row without progress (--restart-policy). A final verdict:
// a requeue would fail the same way.
constexpr int no_progress = 245;
// 240-245 mean only the causes above: a user's program that exits with one
// of them gives the job exit code 1 instead (its own code stays in the
// summary).
constexpr bool reserved(int code) { return code >= hang && code <= no_progress; }
// What a shell reports for a process a signal ended, and what the agent
// exits with when a signal ends it: written here only.
constexpr int signalled(int sig) { return 128 + sig; }

}  // namespace cxxrun::agent::exit_code
