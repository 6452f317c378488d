// How this node meets the others before each start of its worker group, and
// what it owes them while the group runs (keep-alives) and at the end (close).
// Backend::local needs no meeting: every call is a no-op.
#pragma once

#include <chrono>
#include <memory>

#include "agent/config.h"
#include "agent/event_watcher.h"

#include "rendezvous/c10d_rendezvous.h"
#include "store/client.h"

namespace cxxrun::store {
class BackgroundStoreServer;
}  // namespace cxxrun::store

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

  // c10d: a restart anywhere restarts every node, through a new round.
  bool elastic() const { return config_.rdzv.backend == Backend::c10d; }
  // The c10d rendezvous of this node (nullptr for other backends). Not
  // thread-safe: one caller at a time (the supervisor's loop, or the thread
  // it runs rejoin() on while the loop waits).
  rendezvous::C10dRendezvous* rendezvous() { return rdzv_.get(); }
  // Opens the next round and joins it, completing as soon as `expected`
  // nodes are in; fills `config` like join().
  void rejoin(Config& config, int expected);
  // Before a restart without a new round: replaces the workers' store this
  // agent serves (if any) with an empty one on the same port, so the next
  // attempt never reads the last one's keys.
  void renew_worker_store();
  // A watcher on a store connection of its own.
  std::unique_ptr<EventWatcher> make_watcher(EventWatcher::Deliver deliver);

  // Period of keep_alive(); zero when the backend has none.
  std::chrono::milliseconds keep_alive_interval() const;
  // One keep-alive beat; failures are logged, not thrown: a store hiccup
  // must not kill a healthy job. `lost`: the store has been unreachable for
  // keep_alive_interval * keep_alive_max_attempt.
  enum class Beat { ok, failing, lost };
  Beat keep_alive();
  bool store_failing() const { return keep_alive_failures_ > 0; }
  // Fault injection: from now on this node's store is unreachable (its
  // keep-alives fail), or each keep-alive waits `delay` first.
  void inject_store_drop() { store_dropped_ = true; }
  void inject_store_delay(std::chrono::milliseconds delay) { store_delay_ = delay; }

  // The job is over on this node: say so, and if this node hosts the store,
  // keep it up until every member said so too, so nodes still finishing
  // never lose their store: up to close_timeout after a success, up to 5 s
  // after a failure (the others are only reading the failure record then).
  void close(bool succeeded);

 private:
  void host_store_if_needed();
  void connect();
  void join_static(Config& config);
  int serve_worker_store(const std::string& host, int port);
  void apply(Config& config, const rendezvous::Assignment& a);
  store::StoreClient::Options store_options() const;

  const Config& config_;
  std::unique_ptr<store::BackgroundStoreServer> server_;
  // The workers' store when the agent serves it (use_agent_store): a new one
  // each round this node is group rank 0, so no round reads another's keys.
  std::unique_ptr<store::BackgroundStoreServer> worker_store_;
  std::string worker_store_host_;  // what it was bound to, for renew_worker_store()
  std::unique_ptr<store::StoreClient> client_;
  std::unique_ptr<rendezvous::C10dRendezvous> rdzv_;
  std::unique_ptr<store::StoreClient> beat_client_;
  int keep_alive_failures_ = 0;
  bool store_dropped_ = false;
  std::chrono::milliseconds store_delay_{0};
  int members_ = 1;
};

}  // namespace cxxrun::agent
