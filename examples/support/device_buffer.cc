#include "examples/support/device_buffer.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef CXXRUN_EXAMPLES_CUDA
#include <cuda_runtime.h>
#endif

namespace cxxrun::examples {

using worker::Backend;

namespace {

#ifdef CXXRUN_EXAMPLES_CUDA
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#else
[[noreturn]] void no_cuda() {
  throw std::runtime_error("--backend nccl: this build of the examples has no CUDA (CUDAToolkit not found)");
}
#endif

void check_room(size_t have, size_t want) {
  if (want > have)
    throw std::length_error("device buffer of " + std::to_string(have) + " bytes asked for " +
                            std::to_string(want));
}

}  // namespace

void select_device(Backend backend, int local_rank) {
  if (backend != Backend::nccl) return;
#ifdef CXXRUN_EXAMPLES_CUDA
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "--backend nccl needs a GPU: cudaGetDeviceCount");
  if (local_rank >= devices)
    throw std::runtime_error("local rank " + std::to_string(local_rank) + " has no GPU of its own (" +
                             std::to_string(devices) + " visible)");
  check(cudaSetDevice(local_rank), "cudaSetDevice");
#else
  (void)local_rank;
  no_cuda();
#endif
}

void wait_device(Backend backend) {
  if (backend != Backend::nccl) return;
#ifdef CXXRUN_EXAMPLES_CUDA
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

DeviceBuffer::DeviceBuffer(Backend backend, size_t bytes) : backend_(backend), bytes_(bytes) {
  // One byte at least, so data() is a real pointer even for empty buffers.
  const size_t size = bytes ? bytes : 1;
  if (backend == Backend::nccl) {
#ifdef CXXRUN_EXAMPLES_CUDA
    check(cudaMalloc(&data_, size), "cudaMalloc");
#else
    no_cuda();
#endif
  } else {
    // 64-byte alignment: Gloo's vectorised reductions like aligned input.
    data_ = std::aligned_alloc(64, (size + 63) / 64 * 64);
    if (!data_) throw std::bad_alloc();
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (backend_ == Backend::nccl) {
#ifdef CXXRUN_EXAMPLES_CUDA
    cudaFree(data_);
#endif
  } else {
    std::free(data_);
  }
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  check_room(bytes_, bytes);
  if (backend_ != Backend::nccl) {
    std::memcpy(data_, host, bytes);
    return;
  }
#ifdef CXXRUN_EXAMPLES_CUDA
  check(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
#endif
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  check_room(bytes_, bytes);
  if (backend_ != Backend::nccl) {
    std::memcpy(host, data_, bytes);
    return;
  }
#ifdef CXXRUN_EXAMPLES_CUDA
  // cudaMemcpy orders only against the legacy stream; NCCL may run on its own.
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#endif
}

namespace {

// NCCL works on device memory only: host data goes through `staging` and back.
template <class Run>
void on_device(worker::Communicator& comm, DeviceBuffer& staging, void* data, size_t bytes, Run run) {
  if (comm.backend() != Backend::nccl) return run(data);
  staging.upload(data, bytes);
  run(staging.data());
  staging.download(data, bytes);
}

}  // namespace

void allreduce_host(worker::Communicator& comm, DeviceBuffer& staging, void* data, size_t count,
                    worker::DType dtype, worker::ReduceOp op) {
  on_device(comm, staging, data, count * worker::dtype_size(dtype),
            [&](void* p) { comm.allreduce(p, count, dtype, op); });
}

void broadcast_host(worker::Communicator& comm, DeviceBuffer& staging, void* data, size_t count,
                    worker::DType dtype, int root) {
  on_device(comm, staging, data, count * worker::dtype_size(dtype),
            [&](void* p) { comm.broadcast(p, count, dtype, root); });
}

}  // namespace cxxrun::examples
