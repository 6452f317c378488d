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

namespace cxxrun::rendezvous {

class MemberLiveness {
 public:
  virtual ~MemberLiveness() = default;
  // This node took `slot` in a round whose members show they are alive
  // under `alive_prefix`; called before anyone can learn of the slot. It
  // writes this node's descriptor too (`descriptor_key`, the store's key,
  // and `descriptor`), never before what shows this node alive (snapshot()
  // counts on it) and in the same request where it can: every joiner of a
  // round writes both, thousands at once. True when it renewed this node's
  // liveness on the way (the next keep-alive is then an interval away);
  // false when the last one still holds for longer than that.
  virtual bool joining(const std::string& alive_prefix, int slot, const std::string& descriptor_key,
                       const std::string& descriptor) = 0;
  // Who of slots 0..members-1 is alive now, as one line of text: the round's
  // assigner takes it once, when every member has written its descriptor
  // (so its alive key too), and hands it to every member with its
  // assignment (a long one once, under the round's alive_snapshot key). No
  // '|' in it, and never "@".
  virtual std::string snapshot(const std::string& alive_prefix, int members) = 0;
  // This node is a member of that round, which has `members` (slots
  // 0..members-1); `snapshot` is the assigner's, empty if none came.
  virtual void joined(const std::string& alive_prefix, int members, const std::string& snapshot) = 0;
  // One keep-alive; throws on failure (the backend logs it).
  virtual void beat() = 0;
  // Slots of the round whose members stopped.
  virtual std::vector<int> dead_slots() = 0;
  // How many of slots 0..members-1 of a round still show they are alive,
  // asked by a node waiting for that round to end.
  virtual int count_alive(const std::string& alive_prefix, int members) = 0;
};

}  // namespace cxxrun::rendezvous
