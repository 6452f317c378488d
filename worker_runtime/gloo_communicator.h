// The Gloo backend of Communicator: CPU collectives over TCP, bootstrapped
// through the job's store. Internal to cxxrun_worker; init() is the public
// way in. Gloo's headers stay in the .cc.
#pragma once

#include <memory>

#include "worker_runtime/bootstrap.h"
#include "worker_runtime/collective_types.h"
#include "worker_runtime/communicator_interface.h"

namespace cxxrun::worker {

// Connects to every peer (full mesh) within the bounds in communicator.h and
// ends with a barrier, so that when it returns no rank still needs the store
// (rank 0 may exit at once). Throws CollectiveError.
//
// Keys live under "<restart_count>/<group>/<n>/", n counting this rank's
// communicators of that group on that store in this process (as torch
// prefixes each of its groups), so neither a restart nor a second init()
// reads stale keys from a store that outlives them (the agent's).
std::unique_ptr<Communicator> make_gloo_communicator(const BootstrapEnv& env, const Options& options);

}  // namespace cxxrun::worker
