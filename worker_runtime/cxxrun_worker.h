/* The collectives of communicator.h behind a C ABI, for C programs and for
 * Python through ctypes (no C++ types cross it):
 *
 *   cxxrun_comm* comm = cxxrun_init("gloo", 300);
 *   if (!comm) { fprintf(stderr, "%s\n", cxxrun_last_error()); return 1; }
 *   if (cxxrun_allreduce(comm, grads, n, CXXRUN_FLOAT32, CXXRUN_AVG) != 0) ...
 *   cxxrun_finalize(comm);
 *
 * Calls returning int give 0 on success and -1 on failure; then
 * cxxrun_last_error() says why (the same one-line message the C++ API
 * throws). Errors never abort the process. Semantics, bounds and the
 * environment read by cxxrun_init are those of communicator.h. A handle is
 * used by one thread at a time. */
#ifndef CXXRUN_WORKER_RUNTIME_CXXRUN_WORKER_H
#define CXXRUN_WORKER_RUNTIME_CXXRUN_WORKER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cxxrun_comm cxxrun_comm;

/* Values of the `dtype` arguments; the Gloo backend takes the first four. */
enum cxxrun_dtype {
  CXXRUN_FLOAT32 = 0,
  CXXRUN_FLOAT64 = 1,
  CXXRUN_INT32 = 2,
  CXXRUN_INT64 = 3,
  CXXRUN_FLOAT16 = 4,
  CXXRUN_BFLOAT16 = 5
};

/* Values of the `op` arguments. AVG on integers truncates toward zero. */
enum cxxrun_reduce_op { CXXRUN_SUM = 0, CXXRUN_MIN = 1, CXXRUN_MAX = 2, CXXRUN_AVG = 3 };

/* backend: "gloo" (NULL or "" mean "gloo") or "nccl". timeout_seconds bounds
 * the bootstrap and every collective; <= 0 means the default, 300 s.
 * Returns NULL on failure. */
cxxrun_comm* cxxrun_init(const char* backend, double timeout_seconds);

/* This thread's last failure, "" if none; valid until its next failure. */
const char* cxxrun_last_error(void);

/* -1 for a NULL handle. */
int cxxrun_rank(const cxxrun_comm* comm);
int cxxrun_size(const cxxrun_comm* comm);

int cxxrun_allreduce(cxxrun_comm* comm, void* data, size_t count, int dtype, int op);
int cxxrun_broadcast(cxxrun_comm* comm, void* data, size_t count, int dtype, int root);
/* out holds size * count elements, rank i's block at i * count. */
int cxxrun_allgather(cxxrun_comm* comm, const void* in, void* out, size_t count, int dtype);
/* in holds size * count elements; out gets this rank's reduced block. */
int cxxrun_reduce_scatter(cxxrun_comm* comm, const void* in, void* out, size_t count, int dtype, int op);
int cxxrun_barrier(cxxrun_comm* comm);

/* Frees the handle (NULL is fine). No collective may be running on it. */
void cxxrun_finalize(cxxrun_comm* comm);

#ifdef __cplusplus
}
#endif

#endif /* CXXRUN_WORKER_RUNTIME_CXXRUN_WORKER_H */
