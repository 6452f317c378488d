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
//
// The board has a connection of its own, with a short deadline: its calls are
// made on the link thread, which also carries the keep-alives, so a store that
// went away must cost them a short wait, not read_timeout (the main client's
// deadline) with the beats queued behind it and the lost-store verdict late.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/client.h"

namespace cxxrun::rendezvous {

class SpeedBoard {
 public:
  // Opens the board's connection (its calls' deadline short, see above):
  // at the first call, and again at the call after a failed one.
  using Connect = std::function<std::unique_ptr<store::StoreClient>()>;
  // `prefix` is the round's key prefix.
  SpeedBoard(Connect connect, std::string prefix, int group_rank, int members);
  ~SpeedBoard();

  // Each throws store::StoreError as the client does (a failed connect too).
  // Stores this node's summary; returns what group rank 0 said of it.
  std::string exchange(const std::string& summary);
  // Every member's summary, by group rank ("" where none yet).
  std::vector<std::string> all();
  // What the job says of member `group_rank` ("" clears it).
  void tell(int group_rank, const std::string& verdict);

 private:
  std::string speed_key(int group_rank) const;
  std::string said_key(int group_rank) const;
  // Runs `call` on the connection, opened if need be; a failure drops it.
  template <typename Call>
  auto on_store(Call call);

  const Connect connect_;
  std::unique_ptr<store::StoreClient> store_;
  const std::string prefix_;
  const int me_;
  const int members_;
  bool complete_ = false;  // every member's speed key exists
};

}  // namespace cxxrun::rendezvous
