// What a node that a round left out does until it may join the next one: a
// spare (the round was full) or a late joiner (the round completed without
// it) waits for the round's `next` milestone or a moved round number, and
// then lets the last round's members, and a spare of the job's group, join
// first. C10dRendezvous's join hands it such a node and joins the next
// round once it returns.
//
// Thread rule: the rendezvous's one thread; an object per wait (the
// liveness in use may change between joins).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "rendezvous/beat_counters.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/member_liveness.h"
#include "rendezvous/rendezvous.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

// How long a spare lets the last round's members go first into the next
// round; one of another --node-group than the job's waits longer, so that
// a spare of the job's group takes a free place first.
inline constexpr std::chrono::milliseconds kSpareGivesWay{50};
inline constexpr std::chrono::milliseconds kFarSpareGivesWay{500};

class SpareWait {
 public:
  using Log = std::function<void(const std::string&)>;
  // Everything it is given must outlive it. `liveness`: the members' leases
  // (etcd), or none (beat counters). `log` gets a line per event,
  // `progress` the rate-limited "still waiting" lines.
  SpareWait(store::StoreClient& store, const JobKeys& keys, const RendezvousSettings& settings,
            MemberLiveness* liveness, Log log, Log progress);

  // Blocks, without a deadline, until the round after `round` (which
  // completed with `members` members) opens; opens it where every member
  // is gone. Throws RendezvousClosed when the job succeeded meanwhile,
  // RendezvousError when it failed.
  void wait_for_next_round(int round, int members);
  // Sleeps kSpareGivesWay, or kFarSpareGivesWay where this node's
  // --node-group is not the one most of `round`'s members share.
  void give_way(int round, int members);

 private:
  bool all_members_gone(int round, int members, BeatCounters::Seen& seen);
  void open_round_after(int round);

  store::StoreClient& store_;
  const JobKeys& keys_;
  const RendezvousSettings& s_;
  MemberLiveness* const liveness_;
  const Log log_;
  const Log progress_;
};

}  // namespace cxxrun::rendezvous
