// The agent's asynchronous view of the rendezvous seam. Every call on a
// rendezvous::Rendezvous blocks on the network (each with a deadline), and
// the agent's event loop must never block on the network: a slow or dead
// store must not delay reaping, signals, output or a local stop. So the link
// runs the calls on a thread of its own, one at a time and in the order they
// were asked for, and posts each call's continuation back to the loop.
#pragma once

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

 private:
  void loop();

  boost::asio::io_context& io_;
  rendezvous::Rendezvous& rdzv_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> calls_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cxxrun::agent
