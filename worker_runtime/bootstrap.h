// How a worker reaches the job's store and which address its collectives
// bind: the parts of communicator bootstrap shared by every backend.
// Internal to cxxrun_worker (not installed).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "store/client.h"
#include "worker_runtime/collective_types.h"
#include "worker_runtime/worker_env_reader.h"

namespace cxxrun::store {
class BackgroundStoreServer;
}

namespace cxxrun::worker {

// Everything bootstrap reads from the environment, gathered in one place so
// tests can run several ranks as threads of one process.
struct BootstrapEnv {
  WorkerEnv worker;
  // TORCHELASTIC_USE_AGENT_STORE=True: the agent serves MASTER_PORT and every
  // rank is a client; otherwise worker rank 0 serves it (torch's rule).
  bool use_agent_store = false;
  // GLOO_SOCKET_IFNAME, first entry: torch's way to pin Gloo to a NIC.
  std::string socket_ifname;
};

// Throws EnvError like read_worker_env().
BootstrapEnv read_bootstrap_env();

struct StoreLink {
  // Set on rank 0 when it serves the store. Shared process-wide and kept to
  // process exit: a second init() (another group, or after a communicator was
  // destroyed) must find the same server, or its peers, already connected to
  // the old one, would wait on keys that land elsewhere.
  std::shared_ptr<store::BackgroundStoreServer> hosted;
  std::unique_ptr<store::StoreClient> client;
};

// Serves (rank 0, no agent store) and connects within `timeout`. Throws
// CollectiveError naming MASTER_ADDR:MASTER_PORT.
StoreLink connect_store(const BootstrapEnv& env, std::chrono::milliseconds timeout);

// Where the TCP transport of Gloo should listen: Options::bind_address, else
// GLOO_SOCKET_IFNAME (returned as an interface, *is_interface = true), else
// the local address of the store connection. Never gethostname(): Debian maps
// it to 127.0.1.1, which peers on other hosts cannot reach.
// This rank's count of communicators of `group` made so far on the job's store
// in this generation (0, 1, ...), shared by every backend: the n in the key
// prefix "<restart_count>/<group>/<n>/". Counted per store, generation, group
// and rank, since ranks may run as threads of one process and a count shared
// more widely would drift between them.
int next_instance(const WorkerEnv& w, const std::string& group);

std::string choose_bind_address(const Options& options, const BootstrapEnv& env,
                                const store::StoreClient& client, bool* is_interface);

}  // namespace cxxrun::worker
