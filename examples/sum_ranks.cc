// The smallest end-to-end check of a cxxrun job's collectives: every rank
// contributes RANK+1 to an int64 allreduce and checks the total against
// N(N+1)/2. A wrong sum means ranks are missing, duplicated or mixed up
// across groups, which is exactly what a launcher bug would look like.
//
//   cxxrun --standalone --nproc-per-node=4 build/examples/sum_ranks [--backend gloo|nccl]
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "examples/support/device_buffer.h"
#include "examples/support/run_worker.h"
#include "worker_runtime/communicator.h"

namespace ex = cxxrun::examples;
namespace wk = cxxrun::worker;

int main(int argc, char** argv) {
  CLI::App app{"Allreduce of RANK+1; checks the sum is N(N+1)/2."};
  wk::Options options;
  app.add_option("--backend", options.backend, "gloo or nccl")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, wk::Backend>{{"gloo", wk::Backend::gloo}, {"nccl", wk::Backend::nccl}}));
  CLI11_PARSE(app, argc, argv);

  return ex::run_worker("sum_ranks", [&] {
    const wk::WorkerEnv env = wk::read_worker_env();
    ex::select_device(options.backend, env.local_rank);
    auto comm = wk::init(options);
    ex::DeviceBuffer staging(options.backend, sizeof(int64_t));
    int64_t value = comm->rank() + 1;
    ex::allreduce_host(*comm, staging, &value, 1, wk::DType::int64, wk::ReduceOp::sum);
    const int64_t n = comm->size();
    const int64_t expected = n * (n + 1) / 2;
    if (value != expected)
      return ex::fail_worker("sum_ranks", "sum of ranks is " + std::to_string(value) + ", expected " +
                                              std::to_string(expected) + " for " + std::to_string(n) +
                                              " ranks");
    if (comm->rank() == 0) std::printf("sum of ranks ok: %lld\n", static_cast<long long>(value));
    return 0;
  });
}
