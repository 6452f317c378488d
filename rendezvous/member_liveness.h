// How the members of a c10d rendezvous round show they are alive, and how
// the others see one stop: the seam between the algorithm
// (rendezvous/c10d_rendezvous.h), which calls it, and what implements it
// (rendezvous/etcd_liveness.h, leases), with rendezvous/lease_keeper.h and
// rendezvous/state_store.h passing it along. Without one, C10dRendezvous
// counts keep-alive beats in the store, a counter per member (keep_alive(),
// dead_members(); rendezvous/beat_counters.h).
//
// Thread rule: called from the rendezvous's one thread.
#pragma once

#include <string>
#include <vector>

#include "store/client.h"

namespace cxxrun::rendezvous {

class MemberLiveness {
 public:
  virtual ~MemberLiveness() = default;
  // This node is about to join a round whose members show they are alive
  // under `alive_prefix`: it fills in what shows it alive from the join's
  // own write on (StoreClient::Join's alive_prefix and lease), so that
  // snapshot() finds every joiner's key as soon as its record. True when
  // it renewed this node's liveness on the way (the next keep-alive is then
  // an interval away); false when the last one still holds for longer.
  virtual bool joining(const std::string& alive_prefix, store::StoreClient::Join& join) = 0;
  // The join was made: `alive_key` (the store's key, alive_prefix + the
  // joiner's name) shows this node alive in that round.
  virtual void took(const std::string& alive_key) = 0;
  // This node waits beyond the round it joined (a spare, a late joiner):
  // its alive key goes, so that count_alive() counts the members alone.
  virtual void spare() = 0;
  // Who of the round's first `members` joiners of `counter` is alive now, as
  // one line of text: the round's assigner takes it once, when every member
  // has joined (so its alive key is there, unless it is gone), and hands it
  // to every member with its assignment (a long one once, under the round's
  // alive_snapshot key). No '|' in it, and never "@".
  virtual std::string snapshot(const std::string& alive_prefix, const std::string& counter, int members) = 0;
  // This node is a member of that round, which has `members` (slots
  // 0..members-1 of `counter`'s joiners); `snapshot` is the assigner's,
  // empty if none came.
  virtual void joined(const std::string& alive_prefix, const std::string& counter, int members,
                      const std::string& snapshot) = 0;
  // One keep-alive; throws on failure (the backend logs it).
  virtual void beat() = 0;
  // Slots of the round whose members stopped.
  virtual std::vector<int> dead_slots() = 0;
  // How many members of a round of `members` still show they are alive
  // under `alive_prefix`, asked by a node waiting beyond it (spare()).
  virtual int count_alive(const std::string& alive_prefix, int members) = 0;
};

}  // namespace cxxrun::rendezvous
