// torchrun's static backend across nodes: node ranks are given, node 0's
// agent hosts the store on --master-port and the workers share it
// (TORCHELASTIC_USE_AGENT_STORE=True). Not elastic: a failure restarts only
// the failing node's group, as torchrun's does.
#pragma once

#include <memory>

#include "rendezvous/job_store.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::rendezvous {

class StaticBackend : public Rendezvous {
 public:
  StaticBackend(const RendezvousConfig& config, const WorkerStorePlan& workers) : config_(config), plan_(workers) {}

  // Every node publishes its worker count, so ranks are cumulative even
  // when nodes differ, and waits (the static timeout) for all of them.
  Assignment join() override;
  Assignment rejoin() override { return assignment_; }
  void renew_worker_store() override {}
  bool elastic() const override { return false; }
  std::chrono::milliseconds keep_alive_interval() const override { return {}; }
  bool keep_alive() override { return true; }
  Liveness check_members() override { return {{}, config_.nnodes}; }
  void watch(OnEvent) override {}
  void publish_failure(const std::string&) override {}
  RoundEvent finish_round() override { return RoundEvent::done; }
  std::vector<std::string> failure_records(std::chrono::milliseconds) override { return {}; }
  void leave(bool succeeded) override;
  void inject(const StoreFault&) override {}

 private:
  const RendezvousConfig config_;
  const WorkerStorePlan plan_;
  std::unique_ptr<JobStore> store_;
  Assignment assignment_;
};

}  // namespace cxxrun::rendezvous
