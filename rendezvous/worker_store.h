// The workers' store: the TCPStore that worker processes reach at
// MASTER_ADDR:MASTER_PORT. This file is the one home of the MASTER_PORT rule
// (docs/architecture.md, "Where each decision lives"):
//  - the agent serves it (WorkerStorePlan::agent_serves, torch's
//    TORCHELASTIC_USE_AGENT_STORE=True): MASTER_PORT is the port its server
//    bound: the planned port, or one the OS picks when the plan says 0
//    (--standalone, c10d's group rank 0), so two jobs on a host never race
//    for a port;
//  - worker rank 0 serves it (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, or
//    static --nnodes=1): the planned port, or a port free now when the plan
//    says 0;
//  - static across nodes: the rendezvous store itself, on --master-port.
// MASTER_ADDR is the planned address; under c10d, the address group rank
// 0's node reaches the rendezvous store from.
//
// Workers cannot give a token (torch's clients know of none), so a store the
// agent serves admits only the job's nodes: loopback, MASTER_ADDR, and the
// addresses of the round's members.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace cxxrun::store {
class BackgroundStoreServer;
}

namespace cxxrun::rendezvous {

class WorkerStore {
 public:
  WorkerStore();
  ~WorkerStore();
  WorkerStore(const WorkerStore&) = delete;
  WorkerStore& operator=(const WorkerStore&) = delete;

  // Settles MASTER_PORT for workers that will reach this node at `addr`:
  // serves the store when `agent_serves`, else picks the port for worker
  // rank 0. `bind_host` is where the agent's server listens ("" = every
  // interface); `members` are the other nodes' addresses it admits. Throws
  // RendezvousError, one line; PortTaken when a port given (not 0) is in use.
  int settle(bool agent_serves, const std::string& bind_host, const std::string& addr, int port,
             const std::vector<std::string>& members = {});
  // An empty store on the same port for the next attempt (a no-op when
  // worker rank 0 serves it: its store dies with it).
  void renew();
  // Stops serving: this node is no longer where the workers' store is.
  void drop();

 private:
  void serve(const std::string& host, int port);

  std::unique_ptr<store::BackgroundStoreServer> server_;
  std::string host_;
  std::set<std::string> admitted_;
};

// The one line for a taken port that the user named (`origin`, e.g.
// "--master-port=29500"), whether the launcher or the agent finds it taken.
std::string port_taken_message(const std::string& origin, int port, const std::string& host, bool one_node);

// Whether the workers' store admits a connection from `peer` (an IP
// address): loopback, one of this machine's addresses, or one of `nodes`.
bool admits(const std::set<std::string>& nodes, const std::string& peer);

// Where a server that peers reach at `addr` should listen, and nowhere
// else: an address (loopback included) is bound as it is; a name other than
// localhost may stand for any of this machine's interfaces, so every one.
std::string bind_host_for(const std::string& addr);

}  // namespace cxxrun::rendezvous
