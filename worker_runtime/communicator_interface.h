// The interface every backend implements (worker_runtime/gloo_communicator.h,
// worker_runtime/nccl_communicator.h). How a program gets one, and what every
// backend promises, is worker_runtime/communicator.h, which includes this; the
// backends include this, never communicator.h, whose init() knows them all.
#pragma once

#include <cstddef>

#include "worker_runtime/collective_types.h"

namespace cxxrun::worker {

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

}  // namespace cxxrun::worker
