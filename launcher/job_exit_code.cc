#include "launcher/job_exit_code.h"

#include <initializer_list>

#include "agent/exit_codes.h"

namespace cxxrun::launcher {

namespace code = agent::exit_code;

int job_exit_code(std::span<const HostOutcome> hosts, int launcher_signal, bool stopped_unreachable) {
  auto any = [&](int c) {
    for (const HostOutcome& h : hosts)
      if (h.kind == HostOutcome::Kind::exited && h.code == c) return true;
    return false;
  };
  if (any(code::unkillable)) return code::unkillable;
  if (launcher_signal != 0) return code::signalled(launcher_signal);
  if (stopped_unreachable) return code::rendezvous_failed;
  for (int c : {code::usage, code::no_progress, code::oom, code::hang, code::lost})
    if (any(c)) return c;
  for (const HostOutcome& h : hosts)
    if (h.kind == HostOutcome::Kind::exited && h.code != code::success && h.code != code::rendezvous_failed &&
        h.code != code::node_unhealthy)
      return h.code;
  if (any(code::rendezvous_failed)) return code::rendezvous_failed;
  if (any(code::success)) return code::success;
  if (any(code::node_unhealthy)) return code::node_unhealthy;
  return code::lost;
}

}  // namespace cxxrun::launcher
