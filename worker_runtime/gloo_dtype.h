// Element types and reductions as the Gloo backend sees them: the four CPU
// types it computes on, and the reduce functions Gloo calls. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "worker_runtime/collective_types.h"

namespace cxxrun::worker {

const char* dtype_name(DType t);
const char* reduce_op_name(ReduceOp op);

// Gloo's signature: out[i] = in1[i] (op) in2[i], for n elements.
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// float16/bfloat16 have no CPU arithmetic here: CollectiveError saying they
// need the NCCL backend. `where` prefixes the message ("allreduce on rank 1").
void require_gloo_dtype(DType t, const std::string& where);

// avg reduces with sum; the caller divides afterwards (divide_by_size).
ReduceFn reduce_function(DType t, ReduceOp op);

// data[i] /= divisor. Integers divide as C++ does, truncating toward zero
// (an int32 avg of -7 and 0 is -3, not -4): see ReduceOp::avg.
void divide_by_size(void* data, size_t count, DType t, int divisor);

// Calls f.template operator()<T>() with T the C++ type of a Gloo dtype.
template <class F>
decltype(auto) with_gloo_type(DType t, F&& f) {
  switch (t) {
    case DType::float64: return f.template operator()<double>();
    case DType::int32: return f.template operator()<int32_t>();
    case DType::int64: return f.template operator()<int64_t>();
    default: return f.template operator()<float>();  // float32; others rejected earlier
  }
}

}  // namespace cxxrun::worker
