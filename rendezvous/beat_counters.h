// c10d's keep-alive over a TCPStore (over etcd, leases do it: a
// MemberLiveness): each member adds 1 to its own counter, <round>/alive/<slot>,
// every keep-alive interval, and a member whose counter another has not
// seen move for interval * max_attempt, by that reader's own clock, is dead.
// Nothing compares clocks across nodes: only whether a number changed.
//
// Thread rule: the rendezvous's one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "store/client.h"

namespace cxxrun::rendezvous {

class BeatCounters {
 public:
  using Clock = std::chrono::steady_clock;
  // Each member's counter as last read, and when it was last seen to move
  // (its first reading counts as a move).
  using Seen = std::map<int, std::pair<long long, Clock::time_point>>;

  // A round joined: `prefix` is its "<round>/alive/" key, `slot` this
  // node's place in it. What was seen of the last round is forgotten.
  void joined(std::string prefix, int slot);
  // This node's beat, through `store`. Only this node adds to its counter,
  // so an ADD that answers no more than the last one did means the store
  // forgot the job (restarted empty on the same port): throws
  // store::StoreError with `forgotten`, at this beat and every later one.
  void beat(store::StoreClient& store, const std::string& forgotten);
  // How long since `slot`'s counter was seen to move, read now.
  Clock::duration still_for(store::StoreClient& store, int slot, Clock::time_point now);

  // Reads `slot`'s counter under `prefix` into `seen`: true if it moved
  // since an earlier reading.
  static bool read(store::StoreClient& store, const std::string& prefix, int slot, Seen& seen,
                   Clock::time_point now);
  // Whether no counter of `members` under `prefix` moved for `limit`, as
  // the readings in `seen` tell; the first one seen moving ends the check.
  static bool all_still(store::StoreClient& store, const std::string& prefix, int members, Seen& seen,
                        Clock::duration limit);

 private:
  std::string prefix_;
  int slot_ = -1;
  Seen seen_;
  // This node's counter as last seen; -1 once the store forgot the job.
  int64_t counted_ = 0;
};

}  // namespace cxxrun::rendezvous
