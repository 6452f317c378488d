// Keeps this node's lease (a MemberLiveness: etcd's) renewed while the
// rendezvous holds the thread that would otherwise send the agent's
// keep-alives (agent/rendezvous_link.h runs one call at a time).
//
// The lease's TTL is a few keep-alive intervals. A rendezvous step of a
// large job can outlast it: a wait for the others, or a string of requests
// to an etcd busy with thousands of nodes (3,000 re-joining agents: 2 s a
// request). A lapsed lease deletes this node's alive key; the round counts
// it dead, and the DELETE is pushed to every member's watch, N of them for
// N lapses. So the rendezvous beats between the slices of every wait and,
// when one is due, between its steps. Without a lease (c10d's keep-alive
// counters, which the agent's own beats drive) this does nothing and a wait
// is one piece.
//
// Thread rule: the rendezvous's one thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "store/client.h"

namespace cxxrun::rendezvous {

class MemberLiveness;

class LeaseKeeper {
 public:
  using Clock = std::chrono::steady_clock;
  using Failed = std::function<void(const std::string& line)>;

  // `failed` gets the line of a beat that failed; the step goes on (a store
  // that is gone is reported by the step itself).
  LeaseKeeper(std::chrono::milliseconds interval, Failed failed)
      : interval_(interval), failed_(std::move(failed)) {}

  void use(MemberLiveness* liveness) { liveness_ = liveness; }

  // A beat now; a failure goes to `failed`.
  void beat();
  // A beat, if an interval has passed since the last one.
  void beat_if_due() {
    if (liveness_ && Clock::now() - last_ >= interval_) beat();
  }
  // The lease was renewed by other means (the agent's keep-alive, a join).
  void renewed() { last_ = Clock::now(); }

  // Where a slice of a wait that must end by `until` stops for a beat.
  Clock::time_point slice_end(Clock::time_point now, Clock::time_point until) const {
    return liveness_ ? std::min(until, now + interval_) : until;
  }

  // `wait(timeout)`, a store get or wait, until `deadline`: in slices with a
  // beat between them. Rethrows the last slice's StoreTimeout.
  template <typename Wait>
  auto wait(Clock::time_point deadline, Wait&& wait) {
    using std::chrono::milliseconds;
    for (;;) {
      const auto now = Clock::now();
      const auto step = slice_end(now, deadline);
      try {
        return wait(std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(step - now)));
      } catch (const store::StoreTimeout&) {
        if (step >= deadline) throw;
        beat();
      }
    }
  }

 private:
  const std::chrono::milliseconds interval_;
  const Failed failed_;
  MemberLiveness* liveness_ = nullptr;
  Clock::time_point last_ = Clock::now();
};

}  // namespace cxxrun::rendezvous
