// The C ABI of cxxrun_worker.h over communicator.h. No exception may cross
// into C (that would terminate the program), so every entry point catches
// everything and turns it into -1 / NULL plus a thread-local message.
#include "worker_runtime/cxxrun_worker.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker_runtime/communicator.h"

using namespace cxxrun::worker;

struct cxxrun_comm {
  std::unique_ptr<Communicator> impl;
};

namespace {

thread_local std::string last_error;

static_assert(CXXRUN_FLOAT32 == static_cast<int>(DType::float32) && CXXRUN_BFLOAT16 == static_cast<int>(DType::bfloat16));
static_assert(CXXRUN_SUM == static_cast<int>(ReduceOp::sum) && CXXRUN_AVG == static_cast<int>(ReduceOp::avg));

DType to_dtype(int dtype) {
  if (dtype < CXXRUN_FLOAT32 || dtype > CXXRUN_BFLOAT16)
    throw CollectiveError("unknown dtype " + std::to_string(dtype) + " (see enum cxxrun_dtype)");
  return static_cast<DType>(dtype);
}

ReduceOp to_op(int op) {
  if (op < CXXRUN_SUM || op > CXXRUN_AVG)
    throw CollectiveError("unknown reduce op " + std::to_string(op) + " (see enum cxxrun_reduce_op)");
  return static_cast<ReduceOp>(op);
}

template <class Body>
int guarded(cxxrun_comm* comm, Body&& body) {
  if (!comm) {
    last_error = "NULL cxxrun_comm handle";
    return -1;
  }
  try {
    body(*comm->impl);
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return -1;
}

}  // namespace

extern "C" {

cxxrun_comm* cxxrun_init(const char* backend, double timeout_seconds) {
  try {
    Options o;
    const std::string name = backend ? backend : "";
    if (name.empty() || name == "gloo")
      o.backend = Backend::gloo;
    else if (name == "nccl")
      o.backend = Backend::nccl;
    else
      throw CollectiveError("unknown backend '" + name + "' (gloo or nccl)");
    // Capped at a year so the conversion cannot overflow.
    if (timeout_seconds > 0 && std::isfinite(timeout_seconds))
      o.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(std::min(timeout_seconds, 3.2e7) * 1000)));
    return new cxxrun_comm{init(o)};
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return nullptr;
}

const char* cxxrun_last_error(void) { return last_error.c_str(); }

int cxxrun_rank(const cxxrun_comm* comm) { return comm ? comm->impl->rank() : -1; }
int cxxrun_size(const cxxrun_comm* comm) { return comm ? comm->impl->size() : -1; }

int cxxrun_allreduce(cxxrun_comm* comm, void* data, size_t count, int dtype, int op) {
  return guarded(comm, [&](Communicator& c) { c.allreduce(data, count, to_dtype(dtype), to_op(op)); });
}

int cxxrun_broadcast(cxxrun_comm* comm, void* data, size_t count, int dtype, int root) {
  return guarded(comm, [&](Communicator& c) { c.broadcast(data, count, to_dtype(dtype), root); });
}

int cxxrun_allgather(cxxrun_comm* comm, const void* in, void* out, size_t count, int dtype) {
  return guarded(comm, [&](Communicator& c) { c.allgather(in, out, count, to_dtype(dtype)); });
}

int cxxrun_reduce_scatter(cxxrun_comm* comm, const void* in, void* out, size_t count, int dtype, int op) {
  return guarded(comm, [&](Communicator& c) { c.reduce_scatter(in, out, count, to_dtype(dtype), to_op(op)); });
}

int cxxrun_barrier(cxxrun_comm* comm) {
  return guarded(comm, [&](Communicator& c) { c.barrier(); });
}

void cxxrun_finalize(cxxrun_comm* comm) { delete comm; }

}  // extern "C"
