// The agent's asynchronous view of the rendezvous seam. Every call on a
// rendezvous::Rendezvous blocks on the network (each with a deadline), and
// the agent's event loop must never block on the network: a slow or dead
// store must not delay reaping, signals, output or a local stop. So the link
// runs the calls on a thread of its own, one at a time and in the order they
// were asked for, and posts each call's continuation back to the loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

class RendezvousLink {
 public:
  // What runs on the loop once a call is done; may be empty.
  using Then = std::function<void()>;
  using Call = std::function<Then(rendezvous::Rendezvous& rdzv)>;

  RendezvousLink(boost::asio::io_context& io, rendezvous::Rendezvous& rdzv);
  // Waits for the call in flight (bounded by its own deadline) and drops the
  // calls not started yet.
  ~RendezvousLink();
  RendezvousLink(const RendezvousLink&) = delete;
  RendezvousLink& operator=(const RendezvousLink&) = delete;

  // Queues `call`; its continuation runs on the loop. Any thread.
  void call(Call call);

  // For an agent on its way out: drops the calls not started yet and waits
  // at most `limit` for the call in flight. False when one is still in
  // flight then (its store does not answer: the caller may abandon it,
  // Rendezvous::abandon, rather than wait out its deadline in the join).
  bool settle(std::chrono::milliseconds limit);

 private:
  void loop();

  boost::asio::io_context& io_;
  rendezvous::Rendezvous& rdzv_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> calls_;
  bool stop_ = false;
  bool busy_ = false;  // a call is in flight
  std::thread thread_;
};

}  // namespace cxxrun::agent
