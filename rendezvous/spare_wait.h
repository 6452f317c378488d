// How a node that is not a member of a completed round of the c10d
// rendezvous (a spare beyond max, or a late joiner) waits for the next round
// and goes into it: without a deadline, as torchrun's spares wait, until the
// next round opens or the job closes; and then after the members that go
// on, so that a round's first max joiners are the ones a spare should not
// displace.
//
// Owned by C10dRendezvous, which shares its store, keys and liveness with
// it. Called from the rendezvous's one thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "rendezvous/beat_counters.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/round_keys.h"

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous {

class MemberLiveness;

// How long a spare lets the last round's members go first into the next
// round; one of another --node-group than the job's waits longer, so that
// a spare of the job's group takes a free place first.
inline constexpr std::chrono::milliseconds kSpareGivesWay{50};
inline constexpr std::chrono::milliseconds kFarSpareGivesWay{500};

class SpareWait {
 public:
  using Log = std::function<void(const std::string&)>;
  // `store`, `keys` and `settings` outlive this object. `log` says what
  // happens; `progress` says that it still waits, as often as the
  // rendezvous lets it.
  SpareWait(store::StoreClient& store, const RoundKeys& keys, const RendezvousSettings& settings, Log log,
            Log progress)
      : store_(store), keys_(keys), s_(settings), log_(std::move(log)), progress_(std::move(progress)) {}

  // Members are alive by `liveness` (leases) instead of beat counters.
  void use_liveness(MemberLiveness* liveness) { liveness_ = liveness; }

  // Waits until the round after `round` (which completed with `members`)
  // opens. A round whose members are all gone (its job was killed, and is
  // launched again under the same id) opens no next round by itself: this
  // node opens it, as torch's rendezvous moves on when no participant is
  // left. Throws RendezvousClosed when the job closed, RendezvousError when
  // it failed.
  void wait_for_next_round(int round, int members);
  // Lets the members that go on join first, then a spare of the job's group
  // (the most common among the last round's members), then the others.
  void give_way(int round, int members);

 private:
  bool all_members_gone(int round, int members, BeatCounters::Seen& seen);
  void open_round_after(int round);

  store::StoreClient& store_;
  const RoundKeys& keys_;
  const RendezvousSettings& s_;
  Log log_;
  Log progress_;
  MemberLiveness* liveness_ = nullptr;
};

}  // namespace cxxrun::rendezvous
