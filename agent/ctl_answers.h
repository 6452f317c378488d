// This node's answers to cxxrunctl's requests (rendezvous/ctl_requests.h):
// the rendezvous's watcher thread hands each request to the loop, which
// answers it from what the agent holds (`logs`, from the ranks' output kept
// by agent/report/rank_output.h; `stacks`, every running rank's stack taken
// now through the callback it is given, agent/report/rank_stacks.h) and
// sends the answer through the link, off the loop. A request this agent does not read gets an answer
// that says so, so the caller names it instead of waiting.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "agent/hang/rank_stack.h"
#include "agent/report/rank_output.h"

namespace cxxrun::agent {

class RendezvousLink;

class CtlAnswers {
 public:
  // Takes every running rank's stack now and calls back on the loop, without
  // a verdict (the supervisor hands in its hang watchdog's stacks_now).
  using TakeStacks = std::function<void(StacksDone)>;
  CtlAnswers(boost::asio::io_context& io, RendezvousLink& link, std::string node, std::string host,
             TakeStacks take_stacks);
  // Starts watching for requests (through the link); stop() before the
  // supervisor goes.
  void start();
  // On the loop: a line rank `rank` wrote.
  void line(int rank, std::string_view text);

 private:
  void on_request(long long n, const std::string& request);
  void send(long long n, std::string answer);

  boost::asio::io_context& io_;
  RendezvousLink& link_;
  const std::string node_;
  const std::string host_;
  const TakeStacks take_stacks_;
  RankOutput output_;
};

}  // namespace cxxrun::agent
