// The NCCL backend. Compiled only when it is built (CXXRUN_HAVE_NCCL, see
// tests/CMakeLists.txt). Without a GPU (CI, the build machines) the tests
// check the error init() must give; with one, every collective at world size
// 1 (NCCL refuses two ranks on one GPU) and the bounded init.
#include <cuda_runtime.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net/endpoint.h"
#include "worker_runtime/communicator.h"
#include "worker_runtime/nccl_communicator.h"

using namespace cxxrun::worker;
using namespace std::chrono_literals;

namespace {

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;  // "driver insufficient": none usable
  (void)cudaGetLastError();
  return n;
}

// A one-rank job's environment for init(), removed again on scope exit so
// other tests see no launcher.
struct OneRankEnv {
  explicit OneRankEnv(int local_rank = 0) {
    const std::string port = std::to_string(cxxrun::net::pick_free_port("127.0.0.1"));
    const std::string local = std::to_string(local_rank);
    for (auto [k, v] : {std::pair{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", local.c_str()},
                        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port.c_str()}})
      setenv(k, v, 1);
  }
  ~OneRankEnv() {
    for (auto k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(k);
  }
};

std::string init_error(const Options& options) {
  try {
    init(options);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "(no CollectiveError)";
}

Options nccl_options(std::chrono::milliseconds timeout) {
  Options options;
  options.backend = Backend::nccl;
  options.timeout = timeout;
  return options;
}

// False, with a warning saying what goes unchecked, where there is no GPU.
bool have_gpu(const std::string& unchecked) {
  if (visible_devices() > 0) return true;
  WARN("no CUDA device: " << unchecked << " only on a GPU machine");
  return false;
}

// Device memory holding a copy of `values`; read back with get().
template <class T>
struct Device {
  explicit Device(const std::vector<T>& values) : n(values.size()) {
    REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, values.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Device() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> out(n);
    REQUIRE(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
  T* p = nullptr;
  size_t n;
};

}  // namespace

TEST_CASE("NCCL init names the missing CUDA device") {
  const int devices = visible_devices();
  const Options options = nccl_options(10s);
  if (devices == 0) {
    OneRankEnv env;
    const std::string error = init_error(options);
    CHECK_THAT(error, Catch::Contains("CUDA") && Catch::Contains("no CUDA device available") &&
                          Catch::Contains("rank 0 of 1"));
  } else {
    // A GPU machine: a local rank past the last device is the same mistake.
    OneRankEnv env(devices);
    CHECK_THAT(init_error(options), Catch::Contains("LOCAL_RANK=" + std::to_string(devices)) &&
                                        Catch::Contains("has no CUDA device of its own"));
  }
}

TEST_CASE("NCCL collectives at world size 1") {
  if (!have_gpu("the NCCL collectives run")) return;
  OneRankEnv env;
  const Options options = nccl_options(60s);
  auto comm = init(options);
  REQUIRE(comm->backend() == Backend::nccl);
  REQUIRE((comm->rank() == 0 && comm->size() == 1));

  // One rank: every reduction gives back its input, avg divides by 1.
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    Device<float> f({1.5f, -2.0f, 3.25f});
    comm->allreduce(f.p, 3, DType::float32, op);
    CHECK(f.get() == std::vector<float>{1.5f, -2.0f, 3.25f});
  }
  Device<double> d({0.125, 1e300});
  comm->allreduce(d.p, 2, DType::float64, ReduceOp::sum);
  CHECK(d.get() == std::vector<double>{0.125, 1e300});
  Device<int32_t> i32({-7, 0, 9});
  comm->allreduce(i32.p, 3, DType::int32, ReduceOp::avg);
  CHECK(i32.get() == std::vector<int32_t>{-7, 0, 9});
  Device<int64_t> i64({int64_t(1) << 40, -3});
  comm->allreduce(i64.p, 2, DType::int64, ReduceOp::max);
  CHECK(i64.get() == std::vector<int64_t>{int64_t(1) << 40, -3});
  // Half types as bit patterns: 1.0 and -2.0 in float16 and in bfloat16.
  Device<uint16_t> half({0x3C00, 0xC000});
  comm->allreduce(half.p, 2, DType::float16, ReduceOp::sum);
  CHECK(half.get() == std::vector<uint16_t>{0x3C00, 0xC000});
  Device<uint16_t> bf({0x3F80, 0xC000});
  comm->allreduce(bf.p, 2, DType::bfloat16, ReduceOp::avg);
  CHECK(bf.get() == std::vector<uint16_t>{0x3F80, 0xC000});

  Device<int64_t> b({5, 6, 7});
  comm->broadcast(b.p, 3, DType::int64, 0);
  CHECK(b.get() == std::vector<int64_t>{5, 6, 7});

  Device<float> in({4.0f, 8.0f}), out({0.0f, 0.0f});
  comm->allgather(in.p, out.p, 2, DType::float32);
  CHECK(out.get() == std::vector<float>{4.0f, 8.0f});
  comm->allgather(out.p, out.p, 2, DType::float32);  // in place
  CHECK(out.get() == std::vector<float>{4.0f, 8.0f});

  Device<float> rs({0.0f, 0.0f});
  comm->reduce_scatter(in.p, rs.p, 2, DType::float32, ReduceOp::min);
  CHECK(rs.get() == std::vector<float>{4.0f, 8.0f});
  comm->barrier();

  // Rejected calls send nothing and leave the communicator usable.
  CHECK_THROWS_WITH(comm->broadcast(b.p, 3, DType::int64, 1), Catch::Contains("root 1"));
  CHECK_THROWS_WITH(comm->allreduce(nullptr, 3, DType::float32, ReduceOp::sum), Catch::Contains("null buffer"));
  comm->allreduce(nullptr, 0, DType::float32, ReduceOp::sum);  // count 0: nothing to do
  comm->barrier();

  // A second communicator of the same group gets keys of its own.
  auto again = init(options);
  Device<int32_t> x({3});
  again->allreduce(x.p, 1, DType::int32, ReduceOp::sum);
  CHECK(x.get() == std::vector<int32_t>{3});
}

TEST_CASE("NCCL init gives up at the deadline when a rank never joins") {
  if (!have_gpu("the NCCL init deadline is checked")) return;
  // Rank 0 of 2 alone: it sets the unique id, and NCCL's bootstrap then
  // waits for rank 1, which never comes; init must abort by the timeout.
  BootstrapEnv env;
  env.worker.world_size = 2;
  env.worker.master_addr = "127.0.0.1";
  env.worker.master_port = cxxrun::net::pick_free_port("127.0.0.1");
  const Options options = nccl_options(3s);
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(make_nccl_communicator(env, options), Catch::Contains("NCCL init timed out"));
  CHECK(std::chrono::steady_clock::now() - started < 30s);
}

TEST_CASE("NCCL a collective stuck past its deadline aborts the communicator") {
  if (!have_gpu("the NCCL watchdog abort is checked")) return;
  OneRankEnv env;
  const Options options = nccl_options(3s);
  auto comm = init(options);
  // Out of place, so that NCCL has a copy to queue even for one rank (an
  // in-place one-rank collective queues nothing). Filled before the hang:
  // cudaMemcpy waits for the default stream too.
  Device<float> in({1.0f}), out({0.0f});
  // A hang without a second GPU: the communicator's stream is ordered after
  // the legacy default stream, where a host function now sleeps for 8 s.
  // The collective cannot start before it returns, as behind a peer that
  // never comes.
  REQUIRE(cudaLaunchHostFunc(
              nullptr, [](void*) { std::this_thread::sleep_for(std::chrono::seconds(8)); }, nullptr) ==
          cudaSuccess);
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(comm->allgather(in.p, out.p, 1, DType::float32), Catch::Contains("timed out after 3000 ms"));
  // The deadline fired: had the wait outlasted the host function, the copy
  // would have run and the call returned. ncclCommAbort then waits for what
  // is queued ahead of NCCL's work (the host function, here; a kernel stuck
  // on a dead peer is stopped by the abort instead), so the throw comes at
  // about 8 s.
  CHECK(std::chrono::steady_clock::now() - started >= 3s);
  CHECK_THROWS_WITH(comm->barrier(), Catch::Contains("aborted earlier"));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // let the host function finish
}
