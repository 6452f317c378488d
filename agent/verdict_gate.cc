#include "agent/verdict_gate.h"

#include "agent/rendezvous_link.h"
#include "agent/report/reporter.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

VerdictGate::VerdictGate(const Config& config, const std::string& run_dir, RendezvousLink& link, Reporter& reporter,
                         std::string host)
    : link_(link), reporter_(reporter), host_(std::move(host)), history_(config, run_dir) {}

void VerdictGate::judge(int attempt, int round, const NodeOutcome& outcome, std::vector<Failure> local,
                        std::function<void(const History&)> then) {
  auto ask = history_.ask(outcome, std::move(local), host_, round, kSummaryWait);
  link_.call([this, attempt, ask = std::move(ask), then = std::move(then)](rendezvous::Rendezvous& r) mutable
             -> RendezvousLink::Then {
    std::string settled = JobHistory::settle(r, ask);
    return [this, attempt, settled = std::move(settled), then = std::move(then)] {
      const History& h = history_.adopt(settled);
      reporter_.verdict(attempt, h);
      then(h);
    };
  });
}

void VerdictGate::gather_failures(std::vector<Failure> local, std::function<void(std::vector<Failure>)> then) {
  link_.call([this, local = std::move(local), then = std::move(then)](rendezvous::Rendezvous& r) mutable
             -> RendezvousLink::Then {
    auto records = r.failure_records(kSummaryWait);
    return [this, records = std::move(records), local = std::move(local), then = std::move(then)] {
      then(job_failures(records, local, host_));
    };
  });
}

}  // namespace cxxrun::agent
