// Why a worker ended: the one place that decides it. The failure summary,
// the event log, /healthz, /metrics and the job's exit code
// (agent/restart_policy.h) all take the cause from here, so they never
// disagree. The evidence it weighs is gathered elsewhere and kept on the
// Failure: what cxxrun itself did to the worker (Failure::killed_by), what
// the kernel said (Failure::memory, ::fault, ::core_dumped, from
// agent/forensics/postmortem.h) and what the worker wrote (its error file, stderr).
#pragma once

#include <string>
#include <string_view>

#include "agent/forensics/failure.h"

namespace cxxrun::agent {

// The names are what a user would search for; docs/exit-codes.md lists them.
enum class Death {
  exited,            // "exited N": a non-zero exit with no error report
  exception,         // an error file, or a Python traceback on stderr
  crashed,           // SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS
  killed_by_signal,  // any other signal, not sent by cxxrun (an admin, the scheduler)
  killed_by_cxxrun,  // cxxrun killed it: Failure::killed_by says which detector and why
  oom_killed,        // the kernel's OOM killer killed this very process
  unkillable,        // it outlived SIGKILL by --kill-timeout (uninterruptible sleep)
  not_started,       // it could not be executed
};

inline constexpr Death kAllDeaths[] = {Death::exited,           Death::exception,   Death::crashed,
                                       Death::killed_by_signal, Death::killed_by_cxxrun, Death::oom_killed,
                                       Death::unkillable,       Death::not_started};

// "oom-killed", "killed-by-cxxrun", ...
std::string_view death_name(Death d);
// The cause of `f`'s end. Evidence wins over appearance: a SIGKILL the OOM
// killer sent is oom-killed even with an error file, one cxxrun sent is
// killed-by-cxxrun; a crash signal is a crash even if cxxrun asked for it
// with a file timer (then killed-by-cxxrun, since it asked).
Death cause_of(const Failure& f);

// One line naming the cause and its evidence, e.g. "oom-killed: the kernel's
// OOM killer killed pid 42 (limit 512 MiB on memory cgroup /x; peak 511 MiB)"
// or "killed-by-signal: SIGKILL, not sent by cxxrun (no OOM kill recorded
// for it)". Says what evidence is missing rather than guessing.
std::string explain(const Failure& f);

}  // namespace cxxrun::agent
