#include "agent/round_gate.h"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "agent/health/node_health.h"
#include "agent/rendezvous_link.h"
#include "agent/report/reporter.h"

namespace cxxrun::agent {

RoundGate::RoundGate(boost::asio::io_context& io, const Config& config, NodeHealth* health, Reporter& reporter,
                     RendezvousLink& link, const std::shared_ptr<spdlog::logger>& log)
    : io_(io), c_(config), health_(health), reporter_(reporter), link_(link), log_(log) {}

// The loop is done (the job ended, a signal among the ways): a check in
// flight has no one to hear its verdict, so it stops now, with whatever its
// command started, rather than run out its timeout.
RoundGate::~RoundGate() {
  if (health_) {
    health_->stop();
    health_->join();
  }
}

void RoundGate::before_round(std::function<void()> go, std::function<void()> out) {
  const int limit = c_.health.max_node_failures;
  if (limit > 0 && own_failures_ >= limit)
    return step_out({"max-node-failures", false,
                     fmt::format("this node's workers were the first to fail {} times in job {} "
                                 "(--max-node-failures={})",
                                 own_failures_, c_.run_id, limit),
                     {}},
                    std::move(out));
  if (!leave_.empty()) return step_out({"straggler", false, leave_, {}}, std::move(out));
  if (health_ == nullptr || health_->empty()) return go();
  // Off the loop: the last attempt's GPU memory may take seconds to be freed.
  health_->check_async(
      true, [this](std::function<void()> then) { boost::asio::post(io_, std::move(then)); },
      [this, go = std::move(go), out = std::move(out)](const std::vector<CheckResult>& results) mutable {
        if (const CheckResult* failed = first_failure(results)) return step_out(*failed, std::move(out));
        go();
      });
}

// Neither joins the next round nor closes the rendezvous (agent.cc skips
// leave() for this exit): the job goes on without this node.
void RoundGate::step_out(const CheckResult& failed, std::function<void()> out) {
  step_out_of_job(*log_, c_, failed, true,
                  [this](const std::string& check, const std::string& line) { reporter_.node_unhealthy(check, line); });
  link_.call([this, out = std::move(out)](rendezvous::Rendezvous& r) -> RendezvousLink::Then {
    std::string error;
    try {
      r.step_out();
    } catch (const std::exception& e) {
      error = e.what();
    }
    return [this, error, out] {
      if (!error.empty()) log_->warn("could not tell the other nodes that this one steps out: {}", error);
      out();
    };
  });
}

}  // namespace cxxrun::agent
