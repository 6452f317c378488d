#include "agent/restart_policy.h"

namespace cxxrun::agent {
namespace {

using rendezvous::RoundEvent;

Decision exit_with(int code) { return {Action::exit, code, false}; }

// A failure somewhere: restart within the budget, else fail.
Decision after_failure(const Situation& s) {
  if (s.attempt >= s.max_restarts) return {Action::fail, 0, false};
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
    case Cause::reported: return exit_with(failure_exit_code(s.summary));
  }
  return exit_with(exit_code::internal_error);
}

int failure_exit_code(const std::vector<Failure>& ordered) {
  for (const Failure& f : ordered)
    if (!f.stopped) return shell_exit_code(f);
  return exit_code::unknown_failure;
}

}  // namespace cxxrun::agent
