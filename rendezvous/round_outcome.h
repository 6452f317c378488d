// How a running round of the c10d rendezvous ends, as every member learns
// it: the round's event (a worker failed, a node waits to join, a member
// died, or every member's workers succeeded), the failure records, the
// members whose workers finished or stopped, and the restart history (each
// round's attempt records and verdict). Each event is one COMPARE_SET on the
// round's event key: the first writer wins, every member that waits on the
// key is woken at once, and all agree on which came first.
//
// Owned by C10dRendezvous, which tells it each round this node becomes a
// member of (follow()). Called from the rendezvous's one thread, but for
// learned_event().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/rendezvous.h"
#include "rendezvous/round_keys.h"

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous {

class RoundOutcome {
 public:
  // `store` outlives this object.
  RoundOutcome(store::StoreClient& store, const RoundKeys& keys) : store_(store), keys_(keys) {}

  // This node is a member of `round`, which has `members`.
  void follow(int round, int members) {
    round_ = round;
    members_ = members;
  }

  // The store key that the round's one event is written to; agents WAIT on
  // it with a connection of their own.
  std::string event_key() const { return keys_.event(round_); }
  // Ends the round for everyone; returns the event that won (maybe another).
  RoundEvent publish_event(RoundEvent what);
  // The event that ended the current round, none while it runs. Read once:
  // a round's event never changes once written (the first writer wins), so
  // one that this node published, read, or learned (learned_event) is
  // answered without a request.
  RoundEvent current_event();
  // The event of `round` as a watcher on another thread saw it (C10dBackend
  // hands on RoundWatcher's delivery): the re-join that follows reads it
  // from here, not from the store. Thread-safe.
  void learned_event(int round, RoundEvent what);

  // Adds this node's failure record (one line) to the round's and ends the
  // round with "abort" (unless another event came first).
  void publish_failure(const std::string& record);
  // Every failure record of the round so far, in the order they arrived.
  std::vector<std::string> failure_records();
  // This node's workers all succeeded. The last member to get here ends the
  // round with "done". Returns the event that now stands, none if none yet.
  RoundEvent finish_round();
  // Counts this node's group as stopped after the round's failure and waits,
  // at most `timeout`, until every member's is: then every record a member
  // publishes while stopping is in.
  void wait_all_stopped(std::chrono::milliseconds timeout);
  // Ends the round with `dead`, saying how many members were found dead
  // (the first count written stands); returns the event that won.
  RoundEvent publish_dead(int count);
  // How many members the round's `dead` event counted (0 if none).
  int dead_count();

  // The restart history (Rendezvous::attempt_records, settle_verdict): a
  // round's attempt records are appended like its failures; its verdict is
  // one COMPARE_SET, and the job's last one is kept under the job's key for
  // a node that joins a later round.
  void publish_attempt(const std::string& record);
  std::vector<std::string> attempt_records();
  std::string settle_verdict(const std::function<std::string(const std::string& last)>& propose);

 private:
  void remember_event(int round, RoundEvent what);

  store::StoreClient& store_;
  const RoundKeys& keys_;
  int round_ = -1;
  int members_ = 0;
  int counted_stopped_ = -1;  // the round in which this node counted itself stopped
  // (round << 8) | event of the last event known to stand, -1 none; written
  // by the watcher's thread too (learned_event).
  std::atomic<long long> known_event_{-1};
};

}  // namespace cxxrun::rendezvous
