// Paces what this node owes the rendezvous while the job runs: a keep-alive
// beat every keep_alive_interval and, four times per interval, a check for
// members whose beats stopped, so a death is seen within
// keep_alive_interval * keep_alive_max_attempt. Every call goes through the
// rendezvous link (off the loop); a tick that finds the last one's call still
// there skips.
#pragma once

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
    // Members are judged only while this says so (the workers run).
    std::function<bool()> judging;
    // The store has been unreachable for interval * max_attempt.
    std::function<void()> lost;
    // Some members stopped their keep-alives.
    std::function<void(const rendezvous::Rendezvous::Liveness&)> dead;
  };
  // Starts ticking when the backend has keep-alives; stops with the loop.
  KeepAlive(boost::asio::io_context& io, RendezvousLink& link, std::chrono::milliseconds interval, Hooks hooks);
  void cancel();

 private:
  void schedule();
  void tick();
  void answered(const rendezvous::Rendezvous::Liveness& l);

  RendezvousLink& link_;
  const std::chrono::milliseconds interval_;
  Hooks hooks_;
  boost::asio::steady_timer timer_;
  int ticks_ = 0;
  bool in_flight_ = false;
  bool cancelled_ = false;
};

}  // namespace cxxrun::agent
