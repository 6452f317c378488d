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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "worker_runtime/worker_env_reader.h"

namespace cxxrun::worker {

enum class DType { float32, float64, int32, int64, float16, bfloat16 };
// avg is a sum divided by size(); integers divide as C++ does, truncating
// toward zero (an int32 avg of -3 over 2 ranks is -1).
enum class ReduceOp { sum, min, max, avg };
enum class Backend { gloo, nccl };

size_t dtype_size(DType t);

struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  Backend backend = Backend::gloo;
  // Bound of every collective and of the bootstrap (the store phase ends by
  // it; the pair connections then get it again).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Gloo: the interface address to bind; empty = the interface named by
  // GLOO_SOCKET_IFNAME (torch's variable, first entry), else the address this
  // host reaches MASTER_ADDR from (never the hostname's resolution).
  std::string bind_address;
  // A name for the group; keys are "<generation>/<group>/...".
  std::string group = "default";
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  // In place. `count` elements of `dtype` at `data` (device memory for NCCL).
  virtual void allreduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  // `out` holds size() * count elements, rank i's block at i * count. `in`
  // may be this rank's block of `out` (in place), else must not overlap it.
  virtual void allgather(const void* in, void* out, size_t count, DType dtype) = 0;
  // `in` holds size() * count elements; `out` gets this rank's reduced block.
  // Gloo: allreduces a copy of `in` (Gloo 2022 has no reduce-scatter), so it
  // moves about twice a ring reduce-scatter's bytes and needs `in`'s size in
  // scratch memory.
  virtual void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void barrier() = 0;
};

// Builds a communicator from the launcher's environment. Throws EnvError or
// CollectiveError with a one-line message.
std::unique_ptr<Communicator> init(const Options& options = {});

}  // namespace cxxrun::worker
