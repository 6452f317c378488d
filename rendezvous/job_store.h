// This node's connection to a job's rendezvous store, shared by the static
// and c10d backends: it hosts the store when this node is the host, connects
// with retries until the backend's deadline, and runs the leaving handshake
// that keeps a hosted store up until every node is done with it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "rendezvous/rendezvous.h"
#include "rendezvous/state_store.h"
#include "store/client.h"

namespace cxxrun::store {
class BackgroundStoreServer;
}

namespace cxxrun::rendezvous {

class JobStore : public StateStore {
 public:
  // Hosts the store if this node is the host (c10d: the endpoint is this
  // machine, or --rdzv-conf is_host; static: node 0), then connects. Blocks
  // up to join_timeout (static: its timeout). Throws RendezvousError.
  explicit JobStore(const RendezvousConfig& config);
  ~JobStore() override;  // not copyable: it owns a connection

  store::StoreClient& client() override { return *client_; }
  // A connection of its own (keep-alives, the event watcher), with
  // `timeout` as its calls' deadline.
  std::unique_ptr<store::StoreClient> connect_another(std::chrono::milliseconds timeout) const override;

  // Says this node is done. The host then waits until all `members` have
  // said so: up to close_timeout after a success, at most 5 s after a
  // failure (the others only read the failure records then). `first` runs
  // before that, under the same short deadline. Logs, never throws.
  void leave(bool succeeded, int members, const std::function<void()>& first = {}) override;
  // Every client made here shares one flag (Options::abandoned): a
  // connect_another still retrying on another thread gives up too.
  void abandon() override { abandoned_->store(true); }

 private:
  bool host_if_needed(bool first);
  void connect(bool may_host);
  store::StoreClient::Options options() const;

  const RendezvousConfig config_;
  const std::shared_ptr<std::atomic<bool>> abandoned_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<store::BackgroundStoreServer> server_;
  std::unique_ptr<store::StoreClient> client_;
};

}  // namespace cxxrun::rendezvous
