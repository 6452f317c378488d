// Which backend a job's rendezvous runs on: the one place that knows them
// all. The seam (rendezvous.h) includes none of them; the agent asks here
// once, at start, and talks to the seam after.
#pragma once

#include <memory>

#include "rendezvous/rendezvous.h"

namespace cxxrun::rendezvous {

// The backend `config.backend` names: local (one node, no store), static
// (node 0's agent store), c10d over a TCPStore, or c10d over etcd.
std::unique_ptr<Rendezvous> make_rendezvous(const RendezvousConfig& config, const WorkerStorePlan& workers);

}  // namespace cxxrun::rendezvous
