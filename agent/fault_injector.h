// Deterministic faults that tests ask for (--inject-fault, agent/config.h's
// FaultSpec): kill or SIGSTOP a worker a fixed time after its attempt
// started, on the node that holds its rank; drop or slow the store
// connection of the node with a given group rank.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/config.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

class Workers;

class FaultInjector {
 public:
  // `store_fault` hands a store fault to the rendezvous (off the loop).
  using StoreFaultSink = std::function<void(const rendezvous::StoreFault&)>;
  FaultInjector(boost::asio::io_context& io, Workers& group, StoreFaultSink store_fault);
  ~FaultInjector();

  // Arms this attempt's faults (cancelling the last attempt's). They fire
  // only while `armed` says the group runs.
  // `placement`: this node's place in the round (which ranks and node it is).
  void schedule(const Config& config, const rendezvous::Assignment& placement, int attempt,
                std::function<bool()> armed);

 private:
  boost::asio::io_context& io_;
  Workers& group_;
  StoreFaultSink store_fault_;
  std::vector<std::unique_ptr<boost::asio::steady_timer>> timers_;
};

}  // namespace cxxrun::agent
