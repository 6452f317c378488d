// The collectives a training program runs under cxxrun.
//
//   auto comm = cxxrun::worker::init();          // from the launcher's env
//   comm->allreduce(grads.data(), grads.size(), DType::float32, ReduceOp::avg);
//
// Promises: init() reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT and TORCHELASTIC_RESTART_COUNT (a clear EnvError otherwise:
// "not started by cxxrun?"); bootstrap goes through the TCPStore-compatible
// store at MASTER_ADDR:MASTER_PORT (rank 0 hosts it unless
// TORCHELASTIC_USE_AGENT_STORE=True), with every key prefixed by the restart
// generation and the group, so a restarted job never reads a stale key.
// Every collective is bounded by Options::timeout: a dead or hung peer
// surfaces as CollectiveError on the survivors, never a hang.
//
// Gloo backend details:
//   - After a failed collective the communicator is unusable (its peers are
//     mid-operation); later calls throw at once. Restarting the group (the
//     agent's --max-restarts) gives a clean one.
//   - A communicator is used by one thread at a time, and every rank issues
//     the same collectives in the same order.
//   - init() ignores SIGPIPE when its action is still the default, as Python
//     does: Gloo writes with writev(), so a write racing a dead peer's reset
//     could kill a survivor instead of failing its collective.
//   - count == 0 returns at once, without synchronising.
#pragma once

// <cstdint> and the others: what programs got from this header before its
// types moved below it (collective_types.h), kept so they still compile.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "worker_runtime/collective_types.h"
#include "worker_runtime/communicator_interface.h"
#include "worker_runtime/worker_env_reader.h"

namespace cxxrun::worker {

// Builds a communicator from the launcher's environment. Throws EnvError or
// CollectiveError with a one-line message.
std::unique_ptr<Communicator> init(const Options& options = {});

}  // namespace cxxrun::worker
