// Where a job's rendezvous state lives, for the one rendezvous algorithm
// (c10d_rendezvous.h) and its backend (c10d_backend.h): a TCPStore that an
// agent or cxxrun-rdzv serves (job_store.h), or an etcd cluster
// (etcd_job_store.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "store/client.h"

namespace cxxrun::rendezvous {

class MemberLiveness;

class StateStore {
 public:
  virtual ~StateStore() = default;

  // The connection the algorithm runs on.
  virtual store::StoreClient& client() = 0;
  // A connection of its own (keep-alives, the event watcher), with
  // `timeout` as its calls' deadline.
  virtual std::unique_ptr<store::StoreClient> connect_another(std::chrono::milliseconds timeout) const = 0;
  // Replicated (etcd): an outage is waited out, not fatal
  // (Rendezvous::survives_store_outage).
  virtual bool replicated() const { return false; }
  // How members show they are alive; nullptr: beat counters in the store.
  virtual MemberLiveness* liveness() { return nullptr; }
  // This node is done with the job, one of `members`. `first` runs before
  // anything else it does, under a short deadline. Logs, never throws.
  virtual void leave(bool succeeded, int members, const std::function<void()>& first) = 0;
  // The agent leaves because the store is gone (Rendezvous::abandon): every
  // connection this store made or is making, on any thread, stops
  // reconnecting within one backoff step, and later connects fail at once,
  // instead of each waiting out its deadline (read_timeout). Any thread.
  // This default gives up the main connection alone.
  virtual void abandon() { client().cancel(); }
};

}  // namespace cxxrun::rendezvous
