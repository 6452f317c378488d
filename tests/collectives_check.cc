// Checks every Gloo collective against values each rank can compute on its
// own, run by tests/integration/test_collectives.py under cxxrun:
//
//   collectives_check --mode all [--max-bytes N]     every op, dtype and size
//   collectives_check --mode kill --victim R --how exit|hang --report DIR
//       R leaves while the others are in an allreduce; each survivor writes
//       DIR/rank<r> = "<ms until the error>\n<message>" (SIGTERM is ignored
//       so that the agent stopping the group cannot cut the report short)
//   collectives_check --mode restart    rank 1 fails once after bootstrap
//   collectives_check --mode bench --max-bytes N --iters K    float32 sum timing
//
// Exit 0 when every check passed; 1 with "FAIL ..." lines otherwise.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#ifdef CXXRUN_HAVE_NCCL
#include <cuda_runtime.h>
#endif

#include "worker_runtime/communicator.h"

namespace wk = cxxrun::worker;
using wk::DType;
using wk::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode = "all";
  size_t max_bytes = 64u << 20;
  int victim = 1;
  std::string how = "exit";
  std::string report;
  int iters = 5;
  long timeout_ms = 60000;
};

int failures = 0;
int checks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok && failures++ < 20) std::fprintf(stderr, "FAIL %s\n", what.c_str());
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::float32;
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::int32;
  return DType::int64;
}

// Compares element by element; reports the first mismatch only.
template <class T, class Expected>
void expect_all(const std::vector<T>& got, Expected expected, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    T want = expected(i);
    if (got[i] != want) {
      expect(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                        std::to_string(want));
      return;
    }
  }
  expect(true, what);
}

template <class T>
void check_allreduce(wk::Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  const std::string tag = " " + std::to_string(count) + "x" + std::to_string(static_cast<int>(dtype_of<T>()));
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = T(r + 1 + i % 7);
  c.allreduce(v.data(), count, dtype_of<T>(), ReduceOp::sum);
  expect_all(v, [&](size_t i) { return T(n * (n + 1) / 2 + n * (i % 7)); }, "allreduce sum" + tag);

  for (size_t i = 0; i < count; ++i) v[i] = T(r + i % 5);
  c.allreduce(v.data(), count, dtype_of<T>(), ReduceOp::min);
  expect_all(v, [&](size_t i) { return T(i % 5); }, "allreduce min" + tag);

  for (size_t i = 0; i < count; ++i) v[i] = T(r * 3 - int(i % 5));
  c.allreduce(v.data(), count, dtype_of<T>(), ReduceOp::max);
  expect_all(v, [&](size_t i) { return T((n - 1) * 3 - int(i % 5)); }, "allreduce max" + tag);

  // Integers: -(r + i%2) sums to -(n(n-1)/2 + n*(i%2)); the average truncates
  // toward zero (n = 4: -6/4 = -1, not -2). Floats: 2(r+1) averages to n+1.
  for (size_t i = 0; i < count; ++i) v[i] = std::is_integral_v<T> ? T(-(r + int(i % 2))) : T(2 * (r + 1) + i % 3);
  c.allreduce(v.data(), count, dtype_of<T>(), ReduceOp::avg);
  expect_all(v, [&](size_t i) {
    if constexpr (std::is_integral_v<T>) return T(-(n * (n - 1) / 2 + n * int(i % 2)) / n);
    else return T(n + 1 + i % 3);
  }, "allreduce avg" + tag);
}

template <class T>
void check_broadcast(wk::Communicator& c, size_t count) {
  for (int root : {0, c.size() - 1}) {
    std::vector<T> v(count, T(-5));
    if (c.rank() == root)
      for (size_t i = 0; i < count; ++i) v[i] = T(i % 1000 * 3 + root);
    c.broadcast(v.data(), count, dtype_of<T>(), root);
    expect_all(v, [&](size_t i) { return T(i % 1000 * 3 + root); },
               "broadcast root " + std::to_string(root) + " " + std::to_string(count));
  }
}

template <class T>
void check_allgather(wk::Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  auto want = [&](size_t k) { return T(k / count * 1000 + k % count % 1000); };
  std::vector<T> in(count), out(count * n, T(-1));
  for (size_t i = 0; i < count; ++i) in[i] = T(r * 1000 + i % 1000);
  c.allgather(in.data(), out.data(), count, dtype_of<T>());
  expect_all(out, want, "allgather " + std::to_string(count));
  // In place: the input is this rank's block of the output.
  std::vector<T> all(count * n, T(-1));
  std::copy(in.begin(), in.end(), all.begin() + r * count);
  c.allgather(all.data() + r * count, all.data(), count, dtype_of<T>());
  expect_all(all, want, "allgather in place " + std::to_string(count));
}

template <class T>
void check_reduce_scatter(wk::Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  std::vector<T> in(count * n), out(count, T(-1));
  for (size_t k = 0; k < in.size(); ++k) in[k] = T(r + k % 11);
  c.reduce_scatter(in.data(), out.data(), count, dtype_of<T>(), ReduceOp::sum);
  expect_all(out, [&](size_t j) { return T(n * (n - 1) / 2 + n * ((r * count + j) % 11)); },
             "reduce_scatter sum " + std::to_string(count));
  c.reduce_scatter(in.data(), out.data(), count, dtype_of<T>(), ReduceOp::max);
  expect_all(out, [&](size_t j) { return T(n - 1 + (r * count + j) % 11); },
             "reduce_scatter max " + std::to_string(count));
  for (size_t k = 0; k < in.size(); ++k) in[k] = T(2 * (r + 1) + k % 11);
  c.reduce_scatter(in.data(), out.data(), count, dtype_of<T>(), ReduceOp::avg);
  expect_all(out, [&](size_t j) { return T(n + 1 + (r * count + j) % 11); },
             "reduce_scatter avg " + std::to_string(count));
}

template <class T>
void check_type(wk::Communicator& c, const std::vector<size_t>& sizes) {
  for (size_t count : sizes) {
    check_allreduce<T>(c, count);
    check_broadcast<T>(c, count);
    check_allgather<T>(c, count);
    check_reduce_scatter<T>(c, count);
  }
}

template <class F>
void expect_error(F&& f, const std::string& needle, const std::string& what) {
  try {
    f();
    expect(false, what + ": no CollectiveError");
  } catch (const wk::CollectiveError& e) {
    expect(std::string(e.what()).find(needle) != std::string::npos,
           what + ": message '" + e.what() + "' lacks '" + needle + "'");
  }
}

// Backend::nccl where it cannot run, with the message that says why: a
// build without NCCL, or (this check's CPU machines) no GPU. With a GPU the
// backend may well work, which unit_tests checks instead.
void check_nccl_unavailable(const wk::Options& options) {
  wk::Options nccl = options;
  nccl.backend = wk::Backend::nccl;
#ifdef CXXRUN_HAVE_NCCL
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (devices == 0) expect_error([&] { wk::init(nccl); }, "no CUDA device available", "nccl without a GPU");
#else
  expect_error([&] { wk::init(nccl); }, "cxxrun was built without NCCL", "nccl");
#endif
}

int mode_all(const Args& a) {
  wk::Options options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  auto c = wk::init(options);
  const std::vector<size_t> sizes = {1, 3, 1000, 65537};
  check_type<float>(*c, sizes);
  check_type<double>(*c, sizes);
  check_type<int32_t>(*c, sizes);
  check_type<int64_t>(*c, sizes);
  // The large sizes: one allreduce of max_bytes and a reduce-scatter whose
  // input is max_bytes, float32 only (the per-type paths are shared).
  const size_t big = a.max_bytes / sizeof(float);
  if (big > 65537) {
    check_allreduce<float>(*c, big);
    check_reduce_scatter<float>(*c, big / c->size());
    check_allgather<int64_t>(*c, a.max_bytes / 8 / c->size());
  }
  c->barrier();

  uint16_t half[4] = {};
  expect_error([&] { c->allreduce(half, 4, DType::float16, ReduceOp::sum); }, "needs the NCCL backend", "float16");
  expect_error([&] { c->broadcast(half, 4, DType::bfloat16, 0); }, "needs the NCCL backend", "bfloat16");
  float one = 1;
  expect_error([&] { c->broadcast(&one, 1, DType::float32, c->size()); }, "root", "bad root");
  expect_error([&] { c->allreduce(nullptr, 4, DType::float32, ReduceOp::sum); }, "null", "null buffer");
  // Validation errors leave the communicator usable.
  c->allreduce(&one, 1, DType::float32, ReduceOp::sum);
  expect(one == float(c->size()), "allreduce after a rejected call");

  // More communicators in the same process: another group, then the same
  // group again, each under its own store prefix.
  for (const char* group : {"aux", "default"}) {
    wk::Options o2 = options;
    o2.group = group;
    auto c2 = wk::init(o2);
    int64_t x = c2->rank();
    c2->allreduce(&x, 1, DType::int64, ReduceOp::sum);
    expect(x == int64_t(c2->size()) * (c2->size() - 1) / 2, std::string("second communicator, group ") + group);
  }
  check_nccl_unavailable(options);
  c->barrier();
  std::printf("rank %d: %d checks, %d failed\n", c->rank(), checks, failures);
  return failures ? 1 : 0;
}

int mode_kill(const Args& a) {
  signal(SIGTERM, SIG_IGN);
  wk::Options options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  auto c = wk::init(options);
  std::vector<float> v(1 << 20, 1.0f);
  c->allreduce(v.data(), v.size(), DType::float32, ReduceOp::sum);
  c->barrier();
  if (c->rank() == a.victim) {
    // Late enough that the others are already waiting inside the allreduce.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (a.how == "exit") _exit(17);
    signal(SIGTERM, SIG_DFL);  // "hang": alive but silent until stopped
    std::this_thread::sleep_for(std::chrono::seconds(120));
    _exit(18);
  }
  const auto start = Clock::now();
  std::string outcome;
  try {
    for (int i = 0; i < 1000; ++i) c->allreduce(v.data(), v.size(), DType::float32, ReduceOp::sum);
    outcome = "no error";
  } catch (const wk::CollectiveError& e) {
    outcome = e.what();
  }
  const long ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::ofstream(a.report + "/rank" + std::to_string(c->rank())) << ms << "\n" << outcome << "\n";
  std::fprintf(stderr, "rank %d: after %ld ms: %s\n", c->rank(), ms, outcome.c_str());
  return 3;
}

int mode_restart(const Args& a) {
  const char* generation = std::getenv("TORCHELASTIC_RESTART_COUNT");
  wk::Options options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  auto c = wk::init(options);
  if (c->rank() == 1 && generation && std::string(generation) == "0") {
    std::fprintf(stderr, "rank 1: failing generation 0 on purpose\n");
    return 1;
  }
  int64_t x = c->rank() + 1;
  c->allreduce(&x, 1, DType::int64, ReduceOp::sum);
  const int64_t n = c->size();
  expect(x == n * (n + 1) / 2, "sum of ranks");
  std::printf("rank %d: generation %s ok, sum %lld\n", c->rank(), generation ? generation : "?",
              static_cast<long long>(x));
  return failures ? 1 : 0;
}

int mode_bench(const Args& a) {
  wk::Options options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  auto c = wk::init(options);
  const size_t count = a.max_bytes / sizeof(float);
  std::vector<float> v(count, 1.0f);
  c->allreduce(v.data(), count, DType::float32, ReduceOp::sum);  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < a.iters; ++i) {
    std::fill(v.begin(), v.end(), 1.0f);
    c->barrier();
    auto start = Clock::now();
    c->allreduce(v.data(), count, DType::float32, ReduceOp::sum);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    expect(v[0] == float(c->size()) && v[count - 1] == float(c->size()), "bench sum");
  }
  std::sort(ms.begin(), ms.end());
  if (c->rank() == 0) {
    const double median = ms[ms.size() / 2];
    const double algbw = double(a.max_bytes) / (median / 1000) / 1e9;
    const int n = c->size();
    std::printf("allreduce float32 %zu bytes, %d ranks: min %.1f ms, median %.1f ms, algbw %.2f GB/s, busbw %.2f GB/s\n",
                a.max_bytes, n, ms.front(), median, algbw, algbw * 2 * (n - 1) / n);
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode") a.mode = v;
    else if (k == "--max-bytes") a.max_bytes = std::stoull(v);
    else if (k == "--victim") a.victim = std::stoi(v);
    else if (k == "--how") a.how = v;
    else if (k == "--report") a.report = v;
    else if (k == "--iters") a.iters = std::stoi(v);
    else if (k == "--timeout-ms") a.timeout_ms = std::stol(v);
    else {
      std::fprintf(stderr, "collectives_check: unknown argument %s\n", k.c_str());
      return 2;
    }
  }
  try {
    if (a.mode == "all") return mode_all(a);
    if (a.mode == "kill") return mode_kill(a);
    if (a.mode == "restart") return mode_restart(a);
    if (a.mode == "bench") return mode_bench(a);
    std::fprintf(stderr, "collectives_check: unknown mode %s\n", a.mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL collectives_check: %s\n", e.what());
    return 1;
  }
}
