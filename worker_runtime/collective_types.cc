#include "worker_runtime/collective_types.h"

namespace cxxrun::worker {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::float32:
    case DType::int32: return 4;
    case DType::float64:
    case DType::int64: return 8;
    case DType::float16:
    case DType::bfloat16: return 2;
  }
  throw CollectiveError("unknown dtype " + std::to_string(static_cast<int>(t)));
}

}  // namespace cxxrun::worker
