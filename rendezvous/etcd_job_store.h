// A job's rendezvous state in an etcd v3 cluster (--rdzv-backend=etcd-v3):
// the algorithm's store (etcd_store.h), a connection per watcher or beat,
// and liveness by leases (etcd_liveness.h). No agent hosts anything, so the
// job outlives any one node; leaving needs no handshake.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/etcd_liveness.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/state_store.h"

namespace cxxrun::rendezvous {

class EtcdJobStore : public StateStore {
 public:
  // Checks that some member answers, trying until join_timeout with a line
  // per failed try. Throws RendezvousError naming the members.
  explicit EtcdJobStore(const RendezvousSettings& settings);

  store::StoreClient& client() override { return store_; }
  std::unique_ptr<store::StoreClient> connect_another(std::chrono::milliseconds timeout) const override;
  bool replicated() const override { return true; }
  MemberLiveness* liveness() override { return &liveness_; }
  void leave(bool succeeded, int members, const std::function<void()>& first) override;

 private:
  void reach();
  // One warning per failed try, or give_up() once the time is out.
  void retry_or_give_up(const std::string& why, const char* state, int attempt, bool out_of_time) const;
  [[noreturn]] void give_up(const std::string& why) const;

  const RendezvousSettings settings_;
  EtcdStore store_;
  EtcdLiveness liveness_;
};

}  // namespace cxxrun::rendezvous
