// Allreduce bandwidth under cxxrun, reported as nccl-tests does: for each
// size from --min-bytes to --max-bytes (doubling), the mean time of --iters
// in-place allreduces after --warmup untimed ones, algbw = bytes / time and
// busbw = algbw * 2(n-1)/n, the bandwidth each rank's links must carry, which
// is comparable across world sizes. Each size is then checked on fresh data.
//
//   cxxrun --standalone --nproc-per-node=4 build/examples/allreduce_perf
//       [--min-bytes 4096] [--max-bytes 67108864] [--iters 20] [--warmup 5]
//       [--dtype float|double|int32|int64] [--op sum|min|max|avg] [--backend gloo|nccl]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "examples/support/device_buffer.h"
#include "examples/support/run_worker.h"
#include "worker_runtime/communicator.h"

namespace ex = cxxrun::examples;
namespace wk = cxxrun::worker;

namespace {

struct Flags {
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 64 << 20;
  int iters = 20;
  int warmup = 5;
  std::string dtype = "float";
  std::string op = "sum";
  wk::Options options;
};

const std::map<std::string, wk::DType> kDTypes{
    {"float", wk::DType::float32}, {"double", wk::DType::float64}, {"int32", wk::DType::int32}, {"int64", wk::DType::int64}};
const std::map<std::string, wk::ReduceOp> kOps{
    {"sum", wk::ReduceOp::sum}, {"min", wk::ReduceOp::min}, {"max", wk::ReduceOp::max}, {"avg", wk::ReduceOp::avg}};

// Rank r holds (r+1)*k at element i, k = i%5+1: small integers, so every
// op's result is exact in every dtype and known in closed form.
int64_t input_value(int rank, size_t i) { return int64_t(rank + 1) * int64_t(i % 5 + 1); }

double expected_value(wk::ReduceOp op, wk::DType dtype, int world, size_t i) {
  const int64_t k = int64_t(i % 5 + 1);
  const int64_t sum = k * world * (world + 1) / 2;
  switch (op) {
    case wk::ReduceOp::sum: return double(sum);
    case wk::ReduceOp::min: return double(k);
    case wk::ReduceOp::max: return double(k * world);
    case wk::ReduceOp::avg:
      // Integer avg truncates, as NCCL's does.
      return dtype == wk::DType::int32 || dtype == wk::DType::int64 ? double(sum / world) : double(sum) / world;
  }
  return 0;
}

template <typename T>
std::vector<char> fill(int rank, size_t count) {
  std::vector<char> bytes(count * sizeof(T));
  T* v = reinterpret_cast<T*>(bytes.data());
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(input_value(rank, i));
  return bytes;
}

std::vector<char> make_input(wk::DType dtype, int rank, size_t count) {
  switch (dtype) {
    case wk::DType::float32: return fill<float>(rank, count);
    case wk::DType::float64: return fill<double>(rank, count);
    case wk::DType::int32: return fill<int32_t>(rank, count);
    default: return fill<int64_t>(rank, count);
  }
}

template <typename T>
size_t count_wrong(const std::vector<char>& bytes, const Flags& flags, wk::DType dtype, int world) {
  const T* v = reinterpret_cast<const T*>(bytes.data());
  const wk::ReduceOp op = kOps.at(flags.op);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes.size() / sizeof(T); ++i) {
    const double want = expected_value(op, dtype, world, i);
    // float avg divides by n, which may round; everything else is exact.
    const double tolerance = op == wk::ReduceOp::avg ? 1e-6 * std::abs(want) : 0.0;
    wrong += std::abs(double(v[i]) - want) > tolerance;
  }
  return wrong;
}

size_t check_result(const std::vector<char>& bytes, const Flags& flags, wk::DType dtype, int world) {
  switch (dtype) {
    case wk::DType::float32: return count_wrong<float>(bytes, flags, dtype, world);
    case wk::DType::float64: return count_wrong<double>(bytes, flags, dtype, world);
    case wk::DType::int32: return count_wrong<int32_t>(bytes, flags, dtype, world);
    default: return count_wrong<int64_t>(bytes, flags, dtype, world);
  }
}

int bench(const Flags& flags) {
  using clock = std::chrono::steady_clock;
  const wk::WorkerEnv env = wk::read_worker_env();
  const wk::Backend backend = flags.options.backend;
  ex::select_device(backend, env.local_rank);
  auto comm = wk::init(flags.options);
  const int rank = comm->rank();
  const int world = comm->size();
  const wk::DType dtype = kDTypes.at(flags.dtype);
  const wk::ReduceOp op = kOps.at(flags.op);
  const size_t elem = wk::dtype_size(dtype);

  ex::DeviceBuffer data(backend, size_t(flags.max_bytes));
  // Per-rank times and wrong counts travel through a small buffer of their own.
  ex::DeviceBuffer scratch(backend, 2 * sizeof(double));
  if (rank == 0) {
    std::printf("# allreduce_perf: %d rank(s), backend %s, %d warmup + %d timed iterations, in place\n", world,
                backend == wk::Backend::nccl ? "nccl" : "gloo", flags.warmup, flags.iters);
    std::printf("# time: mean per iteration, slowest rank; busbw = algbw * 2(n-1)/n\n");
    std::printf("#%12s %12s %8s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  size_t total_wrong = 0;
  double busbw_sum = 0;
  int sizes = 0;
  for (int64_t size = flags.min_bytes; size <= flags.max_bytes; size *= 2) {
    const size_t count = size_t(size) / elem;
    const size_t bytes = count * elem;
    const std::vector<char> input = make_input(dtype, rank, count);
    // Zeros while timing: repeated in-place sums of real data would overflow
    // (undefined for the integer types), and zero is no slower to reduce.
    const std::vector<char> zeros(bytes, 0);
    data.upload(zeros.data(), bytes);
    for (int i = 0; i < flags.warmup; ++i) comm->allreduce(data.data(), count, dtype, op);
    ex::wait_device(backend);
    comm->barrier();
    const auto start = clock::now();
    for (int i = 0; i < flags.iters; ++i) comm->allreduce(data.data(), count, dtype, op);
    ex::wait_device(backend);
    double stats[2] = {std::chrono::duration<double>(clock::now() - start).count() / flags.iters, 0};

    // Then one allreduce of known input, checked element by element.
    data.upload(input.data(), bytes);
    comm->allreduce(data.data(), count, dtype, op);
    std::vector<char> output(bytes);
    data.download(output.data(), bytes);
    stats[1] = double(check_result(output, flags, dtype, world));
    ex::allreduce_host(*comm, scratch, stats, 2, wk::DType::float64, wk::ReduceOp::max);

    const double algbw = double(bytes) / stats[0] / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    total_wrong += size_t(stats[1]);
    busbw_sum += busbw;
    ++sizes;
    if (rank == 0)
      std::printf(" %12zu %12zu %8s %6s %12.2f %12.3f %12.3f %8zu\n", bytes, count, flags.dtype.c_str(),
                  flags.op.c_str(), stats[0] * 1e6, algbw, busbw, size_t(stats[1]));
  }
  if (rank == 0) {
    std::printf("# out of bounds values : %zu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# avg bus bandwidth    : %.3f GB/s\n", sizes ? busbw_sum / sizes : 0.0);
  }
  if (total_wrong)
    return ex::fail_worker("allreduce_perf", std::to_string(total_wrong) + " wrong values (max over ranks, summed over sizes)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"Allreduce bandwidth, nccl-tests style (algbw, busbw), with a correctness check per size."};
  app.add_option("--min-bytes", flags.min_bytes, "smallest message")->check(CLI::PositiveNumber);
  app.add_option("--max-bytes", flags.max_bytes, "largest message")->check(CLI::PositiveNumber);
  app.add_option("--iters", flags.iters, "timed iterations per size")->check(CLI::PositiveNumber);
  app.add_option("--warmup", flags.warmup, "untimed iterations per size")->check(CLI::NonNegativeNumber);
  app.add_option("--dtype", flags.dtype, "element type")->check(CLI::IsMember({"float", "double", "int32", "int64"}));
  app.add_option("--op", flags.op, "reduction")->check(CLI::IsMember({"sum", "min", "max", "avg"}));
  app.add_option("--backend", flags.options.backend, "gloo or nccl")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, wk::Backend>{{"gloo", wk::Backend::gloo}, {"nccl", wk::Backend::nccl}}));
  CLI11_PARSE(app, argc, argv);
  const int64_t elem = int64_t(wk::dtype_size(kDTypes.at(flags.dtype)));
  if (flags.min_bytes < elem || flags.min_bytes > flags.max_bytes) {
    std::fprintf(stderr, "allreduce_perf: need %lld <= --min-bytes <= --max-bytes, got %lld and %lld\n",
                 static_cast<long long>(elem), static_cast<long long>(flags.min_bytes),
                 static_cast<long long>(flags.max_bytes));
    return 2;
  }
  return ex::run_worker("allreduce_perf", [&] { return bench(flags); });
}
