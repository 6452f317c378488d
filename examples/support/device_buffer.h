// Memory that a collective can run on, whichever backend the example uses.
// Gloo reduces host memory; NCCL only device memory, so with NCCL a buffer
// lives on the GPU and the host copies in and out around the collectives.
// The examples keep their own state (model, expected values) on the host.
#pragma once

#include <cstddef>

#include "worker_runtime/communicator.h"

namespace cxxrun::examples {

// Binds this process to its GPU (LOCAL_RANK) before the communicator is
// built, so NCCL and every buffer below use the same device. No-op for Gloo.
// Throws std::runtime_error when NCCL is asked of a build without CUDA.
void select_device(worker::Backend backend, int local_rank);

// Waits until the device has finished all queued work (collectives included),
// so host timers and host reads see finished results. No-op for Gloo.
void wait_device(worker::Backend backend);

class DeviceBuffer {
 public:
  DeviceBuffer(worker::Backend backend, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return data_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  // Waits for the device first: a collective may still be writing the buffer.
  void download(void* host, size_t bytes) const;

 private:
  worker::Backend backend_;
  size_t bytes_;
  void* data_ = nullptr;
};

// A collective on a host array: straight through for Gloo, staged through
// `staging` (at least count elements) for NCCL.
void allreduce_host(worker::Communicator& comm, DeviceBuffer& staging, void* data, size_t count,
                    worker::DType dtype, worker::ReduceOp op);
void broadcast_host(worker::Communicator& comm, DeviceBuffer& staging, void* data, size_t count,
                    worker::DType dtype, int root);

}  // namespace cxxrun::examples
