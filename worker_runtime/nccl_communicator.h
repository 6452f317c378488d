// The NCCL backend of Communicator: GPU collectives, with the ncclUniqueId
// exchanged through the job's store. Built only when CMake finds CUDA and
// NCCL (CXXRUN_HAVE_NCCL); init() is the public way in. CUDA and NCCL headers
// stay in the .cc, so communicator.h users need neither.
#pragma once

#include <memory>

#include "worker_runtime/bootstrap.h"
#include "worker_runtime/collective_types.h"
#include "worker_runtime/communicator_interface.h"

namespace cxxrun::worker {

// Selects device LOCAL_RANK, then: rank 0 creates the ncclUniqueId and sets
// it under "<restart_count>/<group>/<n>/nccl_unique_id" (n as in
// next_instance), the others get it within Options::timeout, and every rank
// runs a non-blocking ncclCommInitRankConfig bounded by what is left of that
// timeout (ncclCommAbort when it runs out: "NCCL init timed out").
//
// Each collective runs on the communicator's own CUDA stream and returns
// when it has completed on the device (buffers are device memory, usable by
// any stream afterwards). While waiting, the calling thread checks the stream
// and ncclCommGetAsyncError at least every 100 ms; an asynchronous NCCL error
// or Options::timeout aborts the communicator (ncclCommAbort), writes the
// torchelastic error file, and throws CollectiveError naming op, rank and
// cause. Later calls on an aborted communicator throw at once.
//
// Throws CollectiveError: "no CUDA device available" when CUDA sees no
// device (or no driver), and a message naming LOCAL_RANK when it has no
// device of its own.
std::unique_ptr<Communicator> make_nccl_communicator(const BootstrapEnv& env, const Options& options);

}  // namespace cxxrun::worker
