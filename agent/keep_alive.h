// Paces what this node owes the rendezvous while the job runs: a keep-alive
// beat every keep_alive_interval, and four checks per interval for members
// whose beats stopped, so a death is seen within keep_alive_interval *
// keep_alive_max_attempt. Every call goes through the rendezvous link (off
// the loop); one still there when the next is due makes that one wait.
//
// The store counts as lost when no beat got through for interval *
// max_attempt, judged here on the loop by the clock, not by counting failed
// calls: a call stuck on a dead host cannot stretch the verdict, which comes
// at most one tick (a quarter interval, 250 ms at most) after the bound.
// Time in which the loop itself was held (this agent's own work, or the
// whole process not scheduled on a loaded host: a tick that comes an
// interval or more late) does not count: no beat could be sent then, and
// the store is not to blame.
#pragma once

#include <chrono>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

class RendezvousLink;

class KeepAlive {
 public:
  struct Hooks {
    // Nothing is sent while this says so (the link re-forms the job).
    std::function<bool()> paused;
    // Members are judged only while this says so (the workers run, or this
    // node waits for the others to finish).
    std::function<bool()> judging;
    // No beat got through for interval * max_attempt; called on every tick
    // from then on, until a beat gets through again.
    std::function<void(std::chrono::milliseconds silent)> lost;
    // A beat got through again after lost() was called.
    std::function<void()> regained;
    // Some members stopped their keep-alives.
    std::function<void(const rendezvous::Rendezvous::Liveness&)> dead;
  };
  // Starts ticking when `interval` > 0; stops with cancel() or the loop.
  KeepAlive(boost::asio::io_context& io, RendezvousLink& link, std::chrono::milliseconds interval,
            int max_attempt, Hooks hooks);
  void cancel();

 private:
  using Clock = std::chrono::steady_clock;
  void schedule();
  void tick();
  void answered(const rendezvous::Rendezvous::Liveness& l);

  RendezvousLink& link_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds limit_;
  Hooks hooks_;
  boost::asio::steady_timer timer_;
  Clock::time_point last_ok_ = Clock::now();
  Clock::time_point last_beat_{};
  Clock::time_point tick_due_{};  // when the scheduled tick should come
  Clock::time_point last_check_{};
  bool in_flight_ = false;
  bool lost_ = false;  // lost() was called since the last beat that got through
  bool done_ = false;
};

}  // namespace cxxrun::agent
