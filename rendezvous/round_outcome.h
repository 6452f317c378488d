// How a c10d round ends, and what its members leave there for each other:
// the round's event (what ended it for everyone), the count of members a
// `dead` event found dead, each node's failure and attempt records, the
// count of members whose groups stopped, and the restart verdict the
// members settle. C10dRendezvous joins rounds and tells this object which
// round this node is a member of now (entered); the backend reaches it
// through C10dRendezvous::outcome().
//
// Keys (rendezvous/job_keys.h), of the current round k unless said:
//   m/r<k>/event       "abort", "join", "dead" or "done"; first writer wins
//   r<k>/dead          how many members the `dead` event found dead
//   r<k>/failures      failure records, a line each (APPEND)
//   r<k>/finished      ADD counter of members whose workers succeeded
//   r<k>/stopped       ADD counter of members whose workers stopped after
//                      a failure; m/r<k>/all_stopped set by the last one
//   r<k>/attempts      attempt records, a line each (APPEND)
//   r<k>/verdict       the round's verdict, one COMPARE_SET
//   history            the job's last verdict, for a node of a later round
//
// Thread rule: the rendezvous's one thread, but learned_event() from any
// (a watcher's delivery).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/job_keys.h"
#include "rendezvous/rendezvous.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

class RoundOutcome {
 public:
  // `store` and `keys` must outlive this object.
  RoundOutcome(store::StoreClient& store, const JobKeys& keys) : store_(store), keys_(keys) {}

  // This node is now a member of `round`, of `members` members.
  void entered(int round, int members) {
    round_ = round;
    members_ = members;
  }

  // Round events. The store key that one event per round
  // is written to; agents WAIT on it with a connection of their own.
  std::string event_key() const;
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
  // Ends the round with `dead`, saying how many members were found dead
  // (the first count written stands); returns the event that won.
  RoundEvent publish_dead(int count);
  // How many members the round's `dead` event counted (0 if none).
  int dead_count();

  // Adds this node's failure record (one line) to the round's and ends the
  // round with "abort" (unless another event came first).
  void publish_failure(const std::string& record);
  // This node's workers all succeeded. The last member to get here ends the
  // round with "done". Returns the event that now stands, none if none yet.
  RoundEvent finish_round();
  // Every failure record of the round so far, in the order they arrived.
  std::vector<std::string> failure_records();
  // Counts this node's group as stopped after the round's failure and waits,
  // at most `timeout`, until every member's is: then every record a member
  // publishes while stopping is in.
  void wait_all_stopped(std::chrono::milliseconds timeout);

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
  const JobKeys& keys_;
  int round_ = -1;
  int members_ = 0;
  int counted_stopped_ = -1;  // the round in which this node counted itself stopped
  // (round << 8) | event of the last event known to stand, -1 none; written
  // by the watcher's thread too (learned_event).
  std::atomic<long long> known_event_{-1};
};

}  // namespace cxxrun::rendezvous
