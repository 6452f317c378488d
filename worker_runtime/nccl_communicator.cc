#include "worker_runtime/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <thread>

#include "store/server.h"
#include "worker_runtime/error_file.h"

// Non-blocking init (ncclConfig_t::blocking), ncclAvg on every type and
// ncclCommFinalize are what this file relies on.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL >= 2.14 (ncclCommInitRankConfig with blocking = 0)"
#endif

namespace cxxrun::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The longest the waiting thread goes without looking at the stream and at
// ncclCommGetAsyncError: ProcessGroupNCCL's watchdog period.
constexpr std::chrono::microseconds kMaxPoll = milliseconds(100);
// Init and finalize take milliseconds to seconds: their waits start this
// short and double up to kMaxPoll.
constexpr std::chrono::microseconds kFirstPoll{20};
// A collective is waited for by spinning this long first: small ones finish
// in microseconds, and a single sleep costs ~50 us of timer slack, which
// would be most of their time.
constexpr std::chrono::microseconds kSpin{200};

// After the spin, the pause before the next look at a running collective:
// a sixteenth of the time waited so far, so one that takes long is seen
// done at most ~6% late, and the checks stay ≤ kMaxPoll apart.
Clock::duration collective_pause(Clock::duration waited) {
  if (waited < kSpin) return Clock::duration::zero();
  return std::clamp<Clock::duration>(waited / 16, kFirstPoll, kMaxPoll);
}

std::string cuda_error(cudaError_t e) {
  // Clears a non-sticky error, so the next CUDA call does not report it too.
  (void)cudaGetLastError();
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

ncclDataType_t nccl_type(DType t, const std::string& where) {
  switch (t) {
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
  }
  throw CollectiveError(where + ": unknown dtype " + std::to_string(static_cast<int>(t)));
}

// ncclAvg divides on the device: floating types multiply by 1/n first,
// integers sum then divide (truncating toward zero), as ReduceOp::avg says.
ncclRedOp_t nccl_op(ReduceOp op, const std::string& where) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
  }
  throw CollectiveError(where + ": unknown reduce op " + std::to_string(static_cast<int>(op)));
}

// Collectives may be called with another device current (a program driving
// several); NCCL launches on the communicator's device, and the caller gets
// its own device back.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const BootstrapEnv& env, const Options& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::nccl; }
  void allreduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* data, size_t count, DType dtype, int root) override;
  void allgather(const void* in, void* out, size_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void barrier() override;

 private:
  void select_device(int local_rank);
  ncclUniqueId exchange_unique_id(const BootstrapEnv& env, const Options& options, Clock::time_point deadline);
  void init_comm(const ncclUniqueId& id, Clock::time_point deadline);
  // Launches one collective (launch returns NCCL's result) and waits for it.
  template <class Launch>
  void run(const char* op, Launch&& launch);
  // The watchdog. A helper that the calling thread runs rather than a thread
  // of its own: every collective is synchronous and a communicator serves one
  // thread at a time, so the caller would only block anyway, at most one
  // operation is ever in flight, and ncclCommAbort is never raced by a
  // concurrent launch. Returns when the stream is idle and NCCL reports no
  // error; otherwise aborts and throws.
  void watch(const char* op, Clock::time_point deadline);
  // Aborts the communicator, records why, writes the error file and throws.
  [[noreturn]] void fail(const char* op, const std::string& cause);
  void validate(const char* op, size_t count, std::initializer_list<const void*> buffers) const;
  std::string where(const char* op) const { return std::string(op) + " on " + place_; }
  std::string nccl_error(ncclResult_t r) const;

  int rank_;
  int size_;
  int device_ = -1;
  milliseconds timeout_;
  std::string place_;      // "rank 1 of 4 (group 'default', generation 0, cuda:1)"
  std::string comm_name_;  // ncclConfig_t::commName; shows in NCCL's logs
  std::shared_ptr<store::BackgroundStoreServer> hosted_store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* barrier_word_ = nullptr;  // device memory for barrier()'s allreduce
  std::string failure_;            // non-empty once aborted
};

NcclCommunicator::NcclCommunicator(const BootstrapEnv& env, const Options& options)
    : rank_(env.worker.rank), size_(env.worker.world_size), timeout_(options.timeout) {
  const int generation = env.worker.restart_count;
  place_ = "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (group '" + options.group +
           "', generation " + std::to_string(generation) + ", cuda:" + std::to_string(env.worker.local_rank) + ")";
  if (options.timeout <= milliseconds(0))
    throw CollectiveError("init on " + place_ + ": Options::timeout must be positive");
  const auto deadline = Clock::now() + options.timeout;
  // The device first: without one there is nothing to bootstrap, and NCCL
  // binds the communicator to the device current at init.
  select_device(env.worker.local_rank);
  // Blocking (not cudaStreamNonBlocking) on purpose: work on the legacy
  // default stream, where a program's kernels and cudaMemcpy go unless it
  // says otherwise, is then ordered before each collective with no event.
  // A program using streams of its own synchronises them before a call.
  cudaError_t e = cudaStreamCreate(&stream_);
  if (e == cudaSuccess) e = cudaMalloc(&barrier_word_, sizeof(float));
  // Zero, so that the sums barrier() keeps adding stay zero (never NaN).
  if (e == cudaSuccess) e = cudaMemset(barrier_word_, 0, sizeof(float));
  if (e != cudaSuccess) {
    if (stream_) cudaStreamDestroy(stream_);
    throw CollectiveError("init on " + place_ + ": " + cuda_error(e));
  }
  try {
    init_comm(exchange_unique_id(env, options, deadline), deadline);
  } catch (...) {
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

void NcclCommunicator::select_device(int local_rank) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess)
    throw CollectiveError("init on " + place_ + ": the NCCL backend needs a GPU: no CUDA device available (" +
                          "cudaGetDeviceCount: " + cuda_error(e) + ")");
  if (devices == 0)
    throw CollectiveError("init on " + place_ + ": the NCCL backend needs a GPU: no CUDA device available (0 devices)");
  if (local_rank >= devices) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw CollectiveError("init on " + place_ + ": LOCAL_RANK=" + std::to_string(local_rank) +
                          " has no CUDA device of its own: " + std::to_string(devices) + " visible" +
                          (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string()) +
                          "; NCCL needs one GPU per local rank (--nproc-per-node <= GPUs)");
  }
  e = cudaSetDevice(local_rank);
  if (e != cudaSuccess) throw CollectiveError("init on " + place_ + ": cudaSetDevice: " + cuda_error(e));
  device_ = local_rank;
}

ncclUniqueId NcclCommunicator::exchange_unique_id(const BootstrapEnv& env, const Options& options,
                                                  Clock::time_point deadline) {
  StoreLink link = connect_store(env, options.timeout);
  hosted_store_ = link.hosted;
  const int instance = next_instance(env.worker, options.group);
  const std::string prefix =
      std::to_string(env.worker.restart_count) + "/" + options.group + "/" + std::to_string(instance) + "/";
  comm_name_ = "cxxrun/" + prefix + "rank" + std::to_string(rank_);
  const std::string key = prefix + "nccl_unique_id";
  ncclUniqueId id{};
  try {
    if (rank_ == 0) {
      // Embeds rank 0's bootstrap address (NCCL_SOCKET_IFNAME picks the
      // interface): rank 0 must stay until every rank has joined, which
      // init_comm's wait ensures.
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw CollectiveError("init on " + place_ + ": ncclGetUniqueId: " + nccl_error(r));
      link.client->set(key, std::string(id.internal, sizeof(id.internal)));
    } else {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      std::string value = link.client->get(key, std::max(left, milliseconds(1)));
      if (value.size() != sizeof(id.internal))
        throw CollectiveError("init on " + place_ + ": store key '" + key + "' holds " +
                              std::to_string(value.size()) + " bytes, not an ncclUniqueId");
      std::copy(value.begin(), value.end(), id.internal);
    }
  } catch (const store::StoreError& e) {
    throw CollectiveError("bootstrap on " + place_ + ": the ncclUniqueId exchange through the store failed: " +
                          e.what());
  }
  return id;
}

void NcclCommunicator::init_comm(const ncclUniqueId& id, Clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking, so that a rank that never joins costs a timeout instead of
  // a hang inside ncclCommInitRankConfig (torchft's init-hang fix).
  config.blocking = 0;
  config.commName = comm_name_.c_str();
  ncclUniqueId copy = id;
  ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, copy, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string cause = nccl_error(r);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw CollectiveError("init on " + place_ + ": ncclCommInitRankConfig: " + cause);
  }
  auto sleep = kFirstPoll;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    std::string cause;
    if (state != ncclInProgress)
      cause = "NCCL init failed: " + nccl_error(state);
    else if (Clock::now() >= deadline)
      cause = "NCCL init timed out after " + std::to_string(timeout_.count()) +
              " ms (Options::timeout): did every one of the " + std::to_string(size_) + " ranks start?";
    if (!cause.empty()) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      const std::string message = "init on " + place_ + ": " + cause;
      write_error_file(message);
      throw CollectiveError(message);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - Clock::now()));
    sleep = std::min(sleep * 2, kMaxPoll);
  }
}

NcclCommunicator::~NcclCommunicator() {
  DeviceGuard guard(device_);
  if (comm_) {
    // Finalize flushes what NCCL still has in flight; with blocking = 0 it
    // returns at once and the wait is ours, bounded like any collective. A
    // communicator that cannot finalize is aborted instead of hanging exit.
    const auto deadline = Clock::now() + timeout_;
    ncclResult_t state = ncclCommFinalize(comm_);
    auto sleep = kFirstPoll;
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxPoll);
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  cudaFree(barrier_word_);
  cudaStreamDestroy(stream_);
}

std::string NcclCommunicator::nccl_error(ncclResult_t r) const {
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm_);
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}

void NcclCommunicator::fail(const char* op, const std::string& cause) {
  if (comm_) ncclCommAbort(comm_);  // unblocks a kernel stuck waiting on peers
  comm_ = nullptr;
  failure_ = std::string(op) + ": " + cause;
  const std::string message = where(op) + ": " + cause;
  write_error_file(message);
  throw CollectiveError(message);
}

template <class Launch>
void NcclCommunicator::run(const char* op, Launch&& launch) {
  if (!failure_.empty())
    throw CollectiveError(where(op) + ": this communicator was aborted earlier (" + failure_ +
                          "); create a new one (the agent restarts the group)");
  DeviceGuard guard(device_);
  const auto deadline = Clock::now() + timeout_;
  // With blocking = 0 a launch may answer ncclInProgress while NCCL enqueues
  // in the background; watch() waits that out too.
  ncclResult_t r = launch();
  if (r != ncclSuccess && r != ncclInProgress) fail(op, "launch failed: " + nccl_error(r));
  watch(op, deadline);
}

void NcclCommunicator::watch(const char* op, Clock::time_point deadline) {
  const auto start = Clock::now();
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) fail(op, "ncclCommGetAsyncError: " + nccl_error(r));
    if (state != ncclSuccess && state != ncclInProgress)
      fail(op, "asynchronous NCCL error (a peer failed or the network broke): " + nccl_error(state));
    if (state == ncclSuccess) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail(op, "CUDA error on the NCCL stream: " + cuda_error(e));
    }
    const auto now = Clock::now();
    if (now >= deadline)
      fail(op, "timed out after " + std::to_string(timeout_.count()) +
                   " ms (Options::timeout): a peer may have died, hung, or not issued the same collective");
    const auto pause = collective_pause(now - start);
    if (pause > Clock::duration::zero()) std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
  }
}

void NcclCommunicator::validate(const char* op, size_t count, std::initializer_list<const void*> buffers) const {
  for (const void* p : buffers)
    if (count > 0 && p == nullptr)
      throw CollectiveError(where(op) + ": null buffer for " + std::to_string(count) + " elements");
}

void NcclCommunicator::allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const ncclDataType_t type = nccl_type(dtype, where("allreduce"));
  const ncclRedOp_t red = nccl_op(op, where("allreduce"));
  validate("allreduce", count, {data});
  if (count == 0) return;
  run("allreduce", [&] { return ncclAllReduce(data, data, count, type, red, comm_, stream_); });
}

void NcclCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  const ncclDataType_t type = nccl_type(dtype, where("broadcast"));
  validate("broadcast", count, {data});
  if (root < 0 || root >= size_)
    throw CollectiveError(where("broadcast") + ": root " + std::to_string(root) + " is not a rank of this group");
  if (count == 0) return;
  run("broadcast", [&] { return ncclBroadcast(data, data, count, type, root, comm_, stream_); });
}

// NCCL takes the in-place form (in == out + rank * count) as it is.
void NcclCommunicator::allgather(const void* in, void* out, size_t count, DType dtype) {
  const ncclDataType_t type = nccl_type(dtype, where("allgather"));
  validate("allgather", count, {in, out});
  if (count == 0) return;
  run("allgather", [&] { return ncclAllGather(in, out, count, type, comm_, stream_); });
}

void NcclCommunicator::reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  const ncclDataType_t type = nccl_type(dtype, where("reduce_scatter"));
  const ncclRedOp_t red = nccl_op(op, where("reduce_scatter"));
  validate("reduce_scatter", count, {in, out});
  if (count == 0) return;
  run("reduce_scatter", [&] { return ncclReduceScatter(in, out, count, type, red, comm_, stream_); });
}

// NCCL has no barrier; a one-element allreduce is one (ProcessGroupNCCL's
// way too), and returning only after it completed makes it a host barrier.
void NcclCommunicator::barrier() {
  run("barrier", [&] { return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_); });
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const BootstrapEnv& env, const Options& options) {
  return std::make_unique<NcclCommunicator>(env, options);
}

}  // namespace cxxrun::worker
