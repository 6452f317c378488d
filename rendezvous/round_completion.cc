#include "rendezvous/round_completion.h"

#include <algorithm>
#include <cstdio>

namespace cxxrun::rendezvous {
namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g s", d.count() / 1000.0);
  return buf;
}

std::string nodes(int n) { return std::to_string(n) + " node" + (n == 1 ? "" : "s"); }

}  // namespace

std::string nnodes_text(int min, int max) {
  return min == max ? std::to_string(min) : std::to_string(min) + ":" + std::to_string(max);
}

namespace {

// How every "too few nodes" line ends, in the user's --nnodes spelling.
std::string below_minimum(const RendezvousSettings& s) {
  return "fewer than the minimum of " + std::to_string(s.min_nodes) + " (--nnodes=" +
         nnodes_text(s.min_nodes, s.max_nodes) + "); stopping";
}

}  // namespace

std::string stepped_out_too_few(const RendezvousSettings& s, int stepped_out, int left) {
  return nodes(stepped_out) + " of job " + s.run_id + " stepped out (a failed health check) and no spare waits: " +
         std::to_string(left) + " nodes are left, " + below_minimum(s);
}

// Declared in rendezvous.h (the agent says it too); here beside its sibling.
std::string too_few_alive(const RendezvousSettings& s, int alive) {
  return "only " + nodes(alive) + " of job " + s.run_id + (alive == 1 ? " is" : " are") +
         " alive, " + below_minimum(s);
}

RoundCompletion::RoundCompletion(const RendezvousSettings& settings, int expected, Clock::time_point deadline)
    : s_(settings), expected_(expected), deadline_(deadline) {}

RoundCompletion::Next RoundCompletion::next(const RoundSeen& seen, Clock::time_point now) {
  const int min = s_.min_nodes, max = s_.max_nodes, count = seen.count;
  Next out;
  if (count >= max) {
    out.members = max;
    return out;
  }
  // A first round whose every place is taken or declined: nothing but a
  // spare can complete it.
  const int declined = expected_ == 0 ? static_cast<int>(seen.declined.size()) : 0;
  if (count < min && declined > 0 && count + declined >= max) {
    if (!spare_end_) {
      spare_end_ = now + s_.last_call_timeout;
      out.say = "every place of rendezvous '" + s_.run_id + "' is taken or declined; waiting up to " +
                seconds_text(s_.last_call_timeout) + " (last_call_timeout) for a spare";
    }
    if (now >= *spare_end_)
      throw RendezvousLost(nodes(declined) + " of job " + s_.run_id + " stepped out before joining (" +
                           seen.declined.front() + ") and no spare came within " +
                           seconds_text(s_.last_call_timeout) + ": " + nodes(count) + (count == 1 ? " is" : " are") +
                           " in, " + below_minimum(s_));
  }
  // Re-forming a known group: members of the last round that stepped out
  // (agent/health/node_health.h) are not waited for.
  const int left = expected_ > 0 ? seen.stepped_out : 0;
  const int want = std::min(max, expected_ - left);
  if (expected_ > 0 && want < min && count < min)
    throw RendezvousLost(stepped_out_too_few(s_, left, want));
  if (want >= min && count >= want) {
    out.members = count;
    return out;
  }
  if (count >= min) {
    if (!last_call_end_) last_call_end_ = now + s_.last_call_timeout;
    if (now >= *last_call_end_) {
      out.members = count;
      return out;
    }
  }
  if (now >= deadline_)
    throw RendezvousError("timed out after " + seconds_text(s_.join_timeout) + " waiting for rendezvous job=" +
                          s_.run_id + " at " + s_.endpoint + ": " + std::to_string(count) + "/" +
                          nnodes_text(min, max) + " nodes joined");
  // Sleep until the next milestone: the min-th joiner, then the max-th
  // joiner (or the completer, who writes the same key).
  out.milestone = count < min ? min : want >= min && count < want ? want : max;
  out.until = std::min(deadline_, now + s_.progress_interval);
  if (last_call_end_) out.until = std::min(out.until, *last_call_end_);
  if (spare_end_) out.until = std::min(out.until, *spare_end_);
  // While re-forming, a member that steps out is news too: its count is
  // read again after at most one keep-alive interval. (A WAIT on several
  // keys waits for all of them.)
  if (expected_ > 0) out.until = std::min(out.until, now + s_.keep_alive_interval);
  return out;
}

}  // namespace cxxrun::rendezvous
