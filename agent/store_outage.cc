#include "agent/store_outage.h"

#include "agent/report/reporter.h"

namespace cxxrun::agent {

StoreOutage::StoreOutage(const Config& config, bool replicated, Reporter& reporter,
                         const std::shared_ptr<spdlog::logger>& log)
    : c_(config), replicated_(replicated), reporter_(reporter), log_(log) {}

StoreOutage::Then StoreOutage::silent(std::chrono::milliseconds silent,
                                      std::optional<std::chrono::steady_clock::duration> waited) {
  const auto& s = c_.rdzv.settings;
  if (replicated_) {
    if (!outage_) {
      outage_ = true;
      reporter_.rendezvous_unreachable(std::chrono::steady_clock::now() - silent);
      log_->warn("the rendezvous store at {} is unreachable ({} ms without a keep-alive); the workers go on, and "
                 "a failure or a node joining waits up to read_timeout={} ms for it",
                 s.endpoint, silent.count(), s.read_timeout.count());
    }
    if (!waited || *waited < s.read_timeout) return Then::nothing;
    log_->error("the rendezvous store at {} has been unreachable for {} ms; this node's workers succeeded, and it "
                "waited read_timeout={} ms for the other nodes' results; giving up",
                s.endpoint, silent.count(), s.read_timeout.count());
    return Then::end_job;
  }
  log_->error("lost the rendezvous store of job={} at {}: no keep-alive got through for {} ms (limit {} ms)",
              s.run_id, s.endpoint, silent.count(), (s.keep_alive_interval * s.keep_alive_max_attempt).count());
  // In the barrier no worker runs: nothing to stop.
  return waited ? Then::end_job : Then::stop_workers;
}

void StoreOutage::regained() {
  if (!outage_) return;
  outage_ = false;
  reporter_.rendezvous_reachable();
  log_->info("the rendezvous store at {} is reachable again", c_.rdzv.settings.endpoint);
}

}  // namespace cxxrun::agent
