// The round's straggler summaries in the job's store, for
// Rendezvous::exchange_speed, node_speeds and tell_node (agent/straggler/).
// Keys, under the round's prefix ("cxxrun/rdzv/<run_id>/r<k>/"):
//   speed/<group rank>  the member's last window's summary, SET each window
//   said/<group rank>   what group rank 0 says of it ("" nothing)
// Each node costs two requests a window (its SET and a read of its own
// `said` key); group rank 0 reads every member's summary in one MULTI_GET.
// A MULTI_GET waits for a missing key on a TCPStore and fails on etcd, so
// unless every key is there (one CHECK), its first read of a round makes the
// others' empty in one MULTI_SET: a summary already written is lost for one
// window, and no request is made per member.
#pragma once

#include <string>
#include <vector>

#include "store/client.h"

namespace cxxrun::rendezvous {

class SpeedBoard {
 public:
  // `store` must outlive it; `prefix` is the round's key prefix.
  SpeedBoard(store::StoreClient& store, std::string prefix, int group_rank, int members);

  // Stores this node's summary; returns what group rank 0 said of it.
  std::string exchange(const std::string& summary);
  // Every member's summary, by group rank ("" where none yet).
  std::vector<std::string> all();
  // What the job says of member `group_rank` ("" clears it).
  void tell(int group_rank, const std::string& verdict);

 private:
  std::string speed_key(int group_rank) const;
  std::string said_key(int group_rank) const;

  store::StoreClient& store_;
  const std::string prefix_;
  const int me_;
  const int members_;
  bool complete_ = false;  // every member's speed key exists
};

}  // namespace cxxrun::rendezvous
