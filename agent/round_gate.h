// What stands between a decision to restart and the next round: whether
// this node may take part (agent/health/node_health.h's checks, run off the loop;
// --max-node-failures), and, for one that may not, stepping out of the job:
// one log line, the NODE_UNHEALTHY event, --exclude-file, and word to the
// other nodes through the rendezvous (Rendezvous::step_out), so that they
// re-form without waiting for it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/health/host_checks.h"

namespace cxxrun::agent {

class NodeHealth;
class RendezvousLink;
class Reporter;

class RoundGate {
 public:
  // `health` may be null (no checks); `log` is the supervisor's logger,
  // which it renames each round.
  RoundGate(boost::asio::io_context& io, const Config& config, NodeHealth* health, Reporter& reporter,
            RendezvousLink& link, const std::shared_ptr<spdlog::logger>& log);
  ~RoundGate();  // stops a check in flight (NodeHealth::stop) and waits for it

  // This node's own workers failed first (not after another node's).
  void own_failure() { ++own_failures_; }
  // --straggler-action=replace (agent/straggler/straggler_watch.h): this
  // node steps out at the next round for `why`, a slow node's line, as for
  // a failed health check ("": it stays).
  void leave_next(std::string why) { leave_ = std::move(why); }
  // On the loop, later or at once: `go()` when the node may take part in
  // the next round, else `out()` once it has stepped out.
  void before_round(std::function<void()> go, std::function<void()> out);

 private:
  void step_out(const CheckResult& failed, std::function<void()> out);

  boost::asio::io_context& io_;
  const Config& c_;
  NodeHealth* health_;
  Reporter& reporter_;
  RendezvousLink& link_;
  const std::shared_ptr<spdlog::logger>& log_;
  int own_failures_ = 0;
  std::string leave_;
};

}  // namespace cxxrun::agent
