// One node, no rendezvous store (--standalone, static with --nnodes=1): the
// only thing to settle is the workers' store. Nothing is elastic: a restart
// happens here, with an empty workers' store on the same port.
#pragma once

#include "rendezvous/rendezvous.h"
#include "rendezvous/worker_store.h"

namespace cxxrun::rendezvous {

class LocalBackend : public Rendezvous {
 public:
  explicit LocalBackend(const WorkerStorePlan& workers) : plan_(workers) {}

  Assignment join() override;
  Assignment rejoin() override { return join(); }
  void renew_worker_store() override { workers_.renew(); }
  bool elastic() const override { return false; }
  std::chrono::milliseconds keep_alive_interval() const override { return {}; }
  bool keep_alive() override { return true; }
  Liveness check_members() override { return {{}, 1}; }
  void watch(OnEvent) override {}
  void publish_failure(const std::string&) override {}
  RoundEvent finish_round() override { return RoundEvent::done; }
  std::vector<std::string> failure_records(std::chrono::milliseconds) override { return {}; }
  void leave(bool) override {}
  void inject(const StoreFault&) override {}

 private:
  const WorkerStorePlan plan_;
  WorkerStore workers_;
};

}  // namespace cxxrun::rendezvous
