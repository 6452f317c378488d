#include "agent/fault_injector.h"

#include <signal.h>

#include "agent/workers/workers.h"

namespace cxxrun::agent {

FaultInjector::FaultInjector(boost::asio::io_context& io, Workers& group, StoreFaultSink store_fault)
    : io_(io), group_(group), store_fault_(std::move(store_fault)) {}

FaultInjector::~FaultInjector() = default;

void FaultInjector::schedule(const Config& c, const rendezvous::Assignment& placement, int attempt,
                             std::function<bool()> armed) {
  timers_.clear();
  for (const FaultSpec& f : c.faults) {
    const bool worker_fault = f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::stop;
    if (worker_fault &&
        (f.attempt != attempt || f.rank < placement.base_rank || f.rank >= placement.base_rank + c.nproc_per_node))
      continue;
    if (!worker_fault && f.node != placement.group_rank) continue;
    if (f.kind == FaultSpec::Kind::delay_store) {
      store_fault_(rendezvous::StoreFault{false, f.delay});
      continue;
    }
    auto timer = std::make_unique<boost::asio::steady_timer>(io_, f.after);
    timer->async_wait([this, f, armed](const boost::system::error_code& ec) {
      if (ec || !armed()) return;
      if (f.kind == FaultSpec::Kind::drop_store) return store_fault_(rendezvous::StoreFault{true, {}});
      group_.signal_rank(f.rank, f.kind == FaultSpec::Kind::stop ? SIGSTOP : f.signal);
    });
    timers_.push_back(std::move(timer));
  }
}

}  // namespace cxxrun::agent
