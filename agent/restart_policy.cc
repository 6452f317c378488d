#include "agent/restart_policy.h"
#include "agent/forensics/death.h"

namespace cxxrun::agent {
namespace {

using rendezvous::RoundEvent;

Decision exit_with(int code) { return {Action::exit, code, false}; }

// A failure somewhere: restart within the budget, else fail.
Decision after_failure(const Situation& s) {
  if (s.attempt >= s.max_restarts || s.repeats_without_progress) return {Action::fail, 0, false};
  return {s.elastic ? Action::reform : Action::restart, 0, true};
}

// What the rest of the job did decides, once this node's workers are done.
Decision after_job_event(const Situation& s) {
  switch (s.job) {
    case RoundEvent::none: return {Action::wait, 0, false};
    case RoundEvent::done: return exit_with(exit_code::success);
    case RoundEvent::abort: return after_failure(s);
    case RoundEvent::join:
    case RoundEvent::dead: return {Action::reform, 0, false};
  }
  return exit_with(exit_code::internal_error);
}

}  // namespace

Decision decide(const Situation& s) {
  if (s.unkillable && s.cause != Cause::reported) return {Action::fail, 0, false};
  switch (s.cause) {
    case Cause::signal: return exit_with(exit_code::signalled(s.signal));
    case Cause::lost: return exit_with(exit_code::lost);
    case Cause::success:
      if (!s.elastic) return exit_with(exit_code::success);
      return after_job_event(s);
    case Cause::failure:
    case Cause::remote_failure: return after_failure(s);
    case Cause::membership:
      if (s.alive_nodes < s.min_nodes) return exit_with(exit_code::lost);
      return {Action::reform, 0, false};
    case Cause::rendezvous_failed: return exit_with(exit_code::rendezvous_failed);
    case Cause::released: return exit_with(exit_code::spare_released);
    case Cause::reported: {
      const int code = failure_exit_code(s.summary);
      const bool early = s.repeats_without_progress && (s.attempt < s.max_restarts || s.repeats_across_runs);
      return exit_with(early && code != exit_code::unkillable ? exit_code::no_progress : code);
    }
    case Cause::unhealthy: return exit_with(exit_code::node_unhealthy);
  }
  return exit_with(exit_code::internal_error);
}

int failure_exit_code(const std::vector<Failure>& ordered) {
  // A node that cannot kill its workers needs draining, whatever else failed.
  for (const Failure& f : ordered)
    if (cause_of(f) == Death::unkillable) return exit_code::unkillable;
  for (const Failure& f : ordered) {
    if (f.stopped) continue;
    switch (cause_of(f)) {
      case Death::oom_killed: return exit_code::oom;
      case Death::killed_by_cxxrun:
        if (f.killed_by == Killer::hang || f.killed_by == Killer::file_timer) return exit_code::hang;
        break;
      default: break;
    }
    // It failed after the OOM killer killed a child of it (a data
    // loader's worker, most often): the job ran out of memory all the same.
    if (f.memory.child_oom_kills > 0) return exit_code::oom;
    const int own = shell_exit_code(f);
    return exit_code::reserved(own) ? exit_code::unknown_failure : own;
  }
  return exit_code::unknown_failure;
}

}  // namespace cxxrun::agent
