// init(), the one function that knows every backend: above them all, so
// none of them includes communicator.h.
#include "worker_runtime/communicator.h"

#include "worker_runtime/bootstrap.h"
#include "worker_runtime/gloo_communicator.h"
#ifdef CXXRUN_HAVE_NCCL
#include "worker_runtime/nccl_communicator.h"
#endif

namespace cxxrun::worker {

std::unique_ptr<Communicator> init(const Options& options) {
  BootstrapEnv env = read_bootstrap_env();
  switch (options.backend) {
    case Backend::gloo: return make_gloo_communicator(env, options);
    case Backend::nccl:
#ifdef CXXRUN_HAVE_NCCL
      return make_nccl_communicator(env, options);
#else
      // CMake found no CUDA runtime or NCCL (or CXXRUN_WITH_NCCL=OFF).
      throw CollectiveError("cxxrun was built without NCCL (CMake found no CUDA runtime and NCCL); use Backend::gloo");
#endif
  }
  throw CollectiveError("unknown backend " + std::to_string(static_cast<int>(options.backend)));
}

}  // namespace cxxrun::worker
