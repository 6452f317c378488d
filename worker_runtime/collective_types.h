// What a collective is described by: the element types, the reductions,
// the backends, the options a communicator is made with, and the error every
// collective throws. Plain values, below both the Communicator interface
// (worker_runtime/communicator_interface.h) and the backends that implement
// it; worker_runtime/communicator.h, which programs include, includes this.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

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

}  // namespace cxxrun::worker
