// How this node meets the others before each start of its worker group, and
// what it owes them while the group runs (keep-alives) and at the end (close).
// Backend::local needs no meeting: every call is a no-op.
#pragma once

#include <chrono>
#include <memory>

#include "agent/config.h"

namespace cxxrun::rendezvous {
class BackgroundStoreServer;
class StoreClient;
class C10dRendezvous;
}  // namespace cxxrun::rendezvous

namespace cxxrun::agent {

class Meeting {
 public:
  explicit Meeting(const Config& config);
  ~Meeting();
  Meeting(const Meeting&) = delete;
  Meeting& operator=(const Meeting&) = delete;

  // Blocks (with the backend's deadlines) until this node knows its place;
  // fills group_rank, group_world_size, base_rank, world_size, master_addr and
  // master_port of `config`. Throws rendezvous::RendezvousError (or
  // RendezvousClosed for a released spare) with a one-line message.
  void join(Config& config);

  // Period of keep_alive(); zero when the backend has none.
  std::chrono::milliseconds keep_alive_interval() const;
  // One keep-alive beat; failures are logged, not thrown: a store hiccup
  // must not kill a healthy job.
  void keep_alive();
  // The job is over on this node: say so, and if this node hosts the store,
  // keep it up until every member said so too (bounded by close_timeout),
  // so nodes still finishing never lose their store.
  void close();

 private:
  void host_store_if_needed();
  void connect();
  void join_static(Config& config);

  const Config& config_;
  std::unique_ptr<rendezvous::BackgroundStoreServer> server_;
  std::unique_ptr<rendezvous::StoreClient> client_;
  std::unique_ptr<rendezvous::C10dRendezvous> rdzv_;
  bool keep_alive_failing_ = false;
  int members_ = 1;
};

}  // namespace cxxrun::agent
