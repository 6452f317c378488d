// When a forming round completes, for a node waiting in it: the decision
// C10dRendezvous::wait_for_completion makes after each look at the store,
// kept apart from the store so that it is a pure function of what was seen
// and when (tested without a store, tests/unit/rendezvous/test_round_completion.cc).
//
// A round completes with max nodes at once; with `expected` nodes at once
// when re-forming a known group (less the members that stepped out); with
// min or more after last_call_timeout. A first round whose every place is
// taken or declined (Rendezvous::decline) with fewer than min in waits
// last_call_timeout for a spare, then is lost. Past join_timeout it times
// out.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rendezvous.h"

namespace cxxrun::rendezvous {

// What a waiting node read at one look.
struct RoundSeen {
  int count = 0;        // joiners so far (the round's ADD counter)
  int stepped_out = 0;  // re-forming: members of the last round that stepped out
  // First round: "host (pid) why" of each node that declined it, as far as
  // read (they are read only now and then; see reads_declines()).
  std::vector<std::string> declined;
};

class RoundCompletion {
 public:
  using Clock = std::chrono::steady_clock;
  // `expected` > 0: re-forming a known group (Rendezvous::rejoin), 0: a
  // first join. `deadline`: the join's (join_timeout after it began).
  RoundCompletion(const RendezvousSettings& settings, int expected, Clock::time_point deadline);

  struct Next {
    // Complete the round with `members` nodes, or else wait until the
    // joiner count reaches `milestone`, looking again by `until` at the
    // latest.
    std::optional<int> members;
    int milestone = 0;
    Clock::time_point until{};
    // A line worth logging now (a spare is waited for), or empty.
    std::string say;
  };
  // Throws RendezvousLost when too few nodes are left to complete it (with
  // no spare coming), RendezvousError at join_timeout.
  Next next(const RoundSeen& seen, Clock::time_point now);

  // Whether the next look must read the declined nodes even though the
  // wait ended at a milestone: a spare is being waited for.
  bool reads_declines() const { return spare_end_.has_value(); }

 private:
  const RendezvousSettings s_;
  const int expected_;
  const Clock::time_point deadline_;
  std::optional<Clock::time_point> last_call_end_;
  std::optional<Clock::time_point> spare_end_;
};

// "2" or "2:4", as --nnodes says it.
std::string nnodes_text(int min, int max);

// Why a known group cannot re-form: `stepped_out` of its members stepped out
// (a failed health check), no spare waits, and the `left` others are fewer
// than min. One wording whether the round's join finds it or the backend
// before the join (c10d_backend.cc), whichever reads the count first.
std::string stepped_out_too_few(const RendezvousSettings& s, int stepped_out, int left);

}  // namespace cxxrun::rendezvous
