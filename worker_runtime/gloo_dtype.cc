#include "worker_runtime/gloo_dtype.h"

#include <gloo/math.h>

namespace cxxrun::worker {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
  }
  return "unknown dtype";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "unknown op";
}

void require_gloo_dtype(DType t, const std::string& where) {
  switch (t) {
    case DType::float32:
    case DType::float64:
    case DType::int32:
    case DType::int64: return;
    case DType::float16:
    case DType::bfloat16:
      throw CollectiveError(where + ": " + dtype_name(t) +
                            " needs the NCCL backend (the Gloo backend computes on float32, float64, "
                            "int32 and int64)");
  }
  throw CollectiveError(where + ": unknown dtype " + std::to_string(static_cast<int>(t)));
}

ReduceFn reduce_function(DType t, ReduceOp op) {
  return with_gloo_type(t, [op]<typename T>() -> ReduceFn {
    switch (op) {
      case ReduceOp::min: return &gloo::min<T>;
      case ReduceOp::max: return &gloo::max<T>;
      default: return &gloo::sum<T>;  // sum, and avg before its division
    }
  });
}

void divide_by_size(void* data, size_t count, DType t, int divisor) {
  with_gloo_type(t, [&]<typename T>() {
    T* p = static_cast<T*>(data);
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < count; ++i) p[i] /= d;
  });
}

}  // namespace cxxrun::worker
