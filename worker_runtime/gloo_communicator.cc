#include "worker_runtime/gloo_communicator.h"

#include <signal.h>

#include <cstring>
#include <initializer_list>
#include <memory>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "store/server.h"
#include "worker_runtime/gloo_dtype.h"
#include "worker_runtime/gloo_store.h"

namespace cxxrun::worker {
namespace {

using std::chrono::milliseconds;

// Gloo sends with writev(), which raises SIGPIPE when it writes to a peer
// that has reset the connection; with the default action (the agent resets it
// for its workers) a survivor whose write races the reset would die instead
// of seeing an error (Gloo's reader usually notices the reset first). Python
// ignores SIGPIPE at startup, which is why torch never hits this. A handler
// the program set itself is left alone.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

// Gloo starts its messages with "[./gloo/transport/tcp/pair.cc:598] " (or
// "[enforce fail at ...] "); the op and rank we put in front say more.
std::string without_source_location(std::string what) {
  if (what.starts_with('[')) {
    auto end = what.find("] ");
    if (end != std::string::npos && what.find(".cc:") < end) what.erase(0, end + 2);
  }
  return what;
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const BootstrapEnv& env, const Options& options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::gloo; }
  void allreduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* data, size_t count, DType dtype, int root) override;
  void allgather(const void* in, void* out, size_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void barrier() override;

 private:
  // Runs one Gloo operation: names it in any error, and marks the
  // communicator failed after a Gloo error, since its pairs are then in an
  // unknown state and peers may be mid-operation.
  template <class Body>
  void run(const char* op, Body&& body);
  // Throws CollectiveError for what no rank could run: a bad dtype or a null
  // buffer. Leaves the communicator usable (nothing was sent).
  void validate(const char* op, DType dtype, size_t count, std::initializer_list<const void*> buffers) const;
  std::string where(const char* op) const { return std::string(op) + " on " + place_; }
  void allreduce_in_place(void* data, size_t count, DType dtype, ReduceOp op);

  int rank_;
  int size_;
  milliseconds timeout_;
  std::string place_;  // "rank 1 of 4 (group 'default', generation 0)"
  std::shared_ptr<store::BackgroundStoreServer> hosted_store_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  // Gloo matches messages by tag: a fresh one per operation keeps a late
  // message of one operation from being taken for the next.
  uint32_t next_tag_ = 1;
  std::string failure_;  // non-empty once an operation failed
};

GlooCommunicator::GlooCommunicator(const BootstrapEnv& env, const Options& options)
    : rank_(env.worker.rank), size_(env.worker.world_size), timeout_(options.timeout) {
  const int generation = env.worker.restart_count;
  place_ = "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (group '" + options.group +
           "', generation " + std::to_string(generation) + ")";
  if (options.timeout <= milliseconds(0))
    throw CollectiveError("init on " + place_ + ": Options::timeout must be positive");
  ignore_default_sigpipe();
  const auto deadline = GlooStore::Clock::now() + options.timeout;
  StoreLink link = connect_store(env, options.timeout);
  hosted_store_ = link.hosted;
  bool is_interface = false;
  const std::string bind = choose_bind_address(options, env, *link.client, &is_interface);
  try {
    gloo::transport::tcp::attr attr;
    (is_interface ? attr.iface : attr.hostname) = bind;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    GlooStore store(*link.client, deadline);
    gloo::rendezvous::PrefixStore generation_store(std::to_string(generation) + "/" + options.group, store);
    gloo::rendezvous::PrefixStore instance_store(
        std::to_string(next_instance(env.worker, options.group)), generation_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    // Before connecting: the transport copies it, and it bounds each pair's
    // connect as well as every later operation.
    context->setTimeout(options.timeout);
    context->connectFullMesh(instance_store, device);
    context_ = std::move(context);
  } catch (const std::exception& e) {  // gloo's, and StoreError from GlooStore
    throw CollectiveError("bootstrap on " + place_ + " (binding " + (is_interface ? "interface " : "") + bind +
                          ") failed: " + without_source_location(e.what()));
  }
  barrier();
}

template <class Body>
void GlooCommunicator::run(const char* op, Body&& body) {
  if (!failure_.empty())
    throw CollectiveError(where(op) + ": this communicator failed earlier (" + failure_ +
                          "); create a new one (the agent restarts the group)");
  std::string cause;
  try {
    body();
    return;
  } catch (const gloo::EnforceNotMet& e) {  // not derived from gloo::Exception
    cause = without_source_location(e.what());
  } catch (const std::exception& e) {  // gloo::IoException and the rest
    cause = without_source_location(e.what());
  }
  if (cause.find("Timed out") != std::string::npos)
    cause += " (Options::timeout is " + std::to_string(timeout_.count()) + " ms)";
  failure_ = std::string(op) + ": " + cause;
  throw CollectiveError(where(op) + ": " + cause);
}

void GlooCommunicator::validate(const char* op, DType dtype, size_t count,
                                std::initializer_list<const void*> buffers) const {
  require_gloo_dtype(dtype, where(op));
  for (const void* p : buffers)
    if (count > 0 && p == nullptr)
      throw CollectiveError(where(op) + ": null buffer for " + std::to_string(count) + " elements");
}

void GlooCommunicator::allreduce_in_place(void* data, size_t count, DType dtype, ReduceOp op) {
  gloo::AllreduceOptions o(context_);
  with_gloo_type(dtype, [&]<typename T>() { o.setOutput(static_cast<T*>(data), count); });
  o.setReduceFunction(reduce_function(dtype, op));
  o.setTag(next_tag_++);
  o.setTimeout(timeout_);
  gloo::allreduce(o);
}

void GlooCommunicator::allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  validate("allreduce", dtype, count, {data});
  if (count == 0) return;
  run("allreduce", [&] { allreduce_in_place(data, count, dtype, op); });
  if (op == ReduceOp::avg) divide_by_size(data, count, dtype, size_);
}

void GlooCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  validate("broadcast", dtype, count, {data});
  if (root < 0 || root >= size_)
    throw CollectiveError(where("broadcast") + ": root " + std::to_string(root) + " is not a rank of this group");
  if (count == 0) return;
  run("broadcast", [&] {
    gloo::BroadcastOptions o(context_);
    with_gloo_type(dtype, [&]<typename T>() { o.setOutput(static_cast<T*>(data), count); });
    o.setRoot(root);
    o.setTag(next_tag_++);
    o.setTimeout(timeout_);
    gloo::broadcast(o);
  });
}

void GlooCommunicator::allgather(const void* in, void* out, size_t count, DType dtype) {
  validate("allgather", dtype, count, {in, out});
  if (count == 0) return;
  run("allgather", [&] {
    gloo::AllgatherOptions o(context_);
    with_gloo_type(dtype, [&]<typename T>() {
      T* all = static_cast<T*>(out);
      // In place (`in` is already this rank's block of `out`): Gloo then
      // sends from the output, and must not memcpy a block onto itself.
      if (static_cast<const T*>(in) != all + static_cast<size_t>(rank_) * count)
        o.setInput(const_cast<T*>(static_cast<const T*>(in)), count);
      o.setOutput(all, count * size_);
    });
    o.setTag(next_tag_++);
    o.setTimeout(timeout_);
    gloo::allgather(o);
  });
}

// Gloo (2022) has no reduce-scatter in its options API. Allreducing a copy of
// the whole input and keeping this rank's block moves about twice the bytes a
// ring reduce-scatter would ((n-1)/n of the input, twice, instead of once) and
// needs one input-sized scratch buffer; on CPU over TCP that is a fair price
// for reusing Gloo's tested allreduce rather than a hand-written ring.
void GlooCommunicator::reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  validate("reduce_scatter", dtype, count, {in, out});
  if (count == 0) return;
  const size_t block = count * dtype_size(dtype);
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(block * size_);
  std::memcpy(scratch.get(), in, block * size_);
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  run("reduce_scatter", [&] { allreduce_in_place(scratch.get(), count * size_, dtype, combine); });
  std::memcpy(out, scratch.get() + block * rank_, block);
  if (op == ReduceOp::avg) divide_by_size(out, count, dtype, size_);
}

void GlooCommunicator::barrier() {
  run("barrier", [&] {
    gloo::BarrierOptions o(context_);
    o.setTag(next_tag_++);
    o.setTimeout(timeout_);
    gloo::barrier(o);
  });
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const BootstrapEnv& env, const Options& options) {
  return std::make_unique<GlooCommunicator>(env, options);
}

}  // namespace cxxrun::worker
