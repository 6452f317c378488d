/* Compiled as C: proves worker_runtime/cxxrun_worker.h is a clean C ABI, and
 * runs each entry point once under cxxrun (tests/integration/
 * test_collectives.py). Exit 0 when all agree with the expected values. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "worker_runtime/cxxrun_worker.h"

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL %s (last error: %s)\n", what, cxxrun_last_error());
    ++failures;
  }
}

int main(void) {
  expect(cxxrun_init("carrier-pigeon", 5) == NULL && strstr(cxxrun_last_error(), "unknown backend") != NULL,
         "unknown backend is refused");
  expect(cxxrun_init("nccl", 5) == NULL && strstr(cxxrun_last_error(), "NCCL") != NULL, "nccl without NCCL or a GPU is refused");

  cxxrun_comm* comm = cxxrun_init("gloo", 30);
  if (!comm) {
    fprintf(stderr, "FAIL cxxrun_init: %s\n", cxxrun_last_error());
    return 1;
  }
  const int rank = cxxrun_rank(comm), size = cxxrun_size(comm);
  expect(rank >= 0 && size >= 1 && rank < size, "rank and size");

  int32_t x[2] = {rank + 1, -rank};
  expect(cxxrun_allreduce(comm, x, 2, CXXRUN_INT32, CXXRUN_SUM) == 0, "allreduce call");
  expect(x[0] == size * (size + 1) / 2 && x[1] == -size * (size - 1) / 2, "allreduce values");

  double d = rank == size - 1 ? 2.5 : 0.0;
  expect(cxxrun_broadcast(comm, &d, 1, CXXRUN_FLOAT64, size - 1) == 0 && d == 2.5, "broadcast");

  int64_t mine = 10 * rank, all[64];
  expect(cxxrun_allgather(comm, &mine, all, 1, CXXRUN_INT64) == 0, "allgather call");
  for (int i = 0; i < size && i < 64; ++i) expect(all[i] == 10 * i, "allgather values");

  float in[64], out = -1;
  for (int i = 0; i < size && i < 64; ++i) in[i] = (float)(i + rank);
  expect(cxxrun_reduce_scatter(comm, in, &out, 1, CXXRUN_FLOAT32, CXXRUN_MAX) == 0, "reduce_scatter call");
  expect(out == (float)(rank + size - 1), "reduce_scatter value");

  uint16_t half = 0;
  expect(cxxrun_allreduce(comm, &half, 1, CXXRUN_FLOAT16, CXXRUN_SUM) == -1 &&
             strstr(cxxrun_last_error(), "needs the NCCL backend") != NULL,
         "float16 is refused");
  expect(cxxrun_allreduce(comm, x, 1, 42, CXXRUN_SUM) == -1 && strstr(cxxrun_last_error(), "dtype") != NULL,
         "bad dtype is refused");
  expect(cxxrun_barrier(comm) == 0, "barrier");
  expect(cxxrun_barrier(NULL) == -1 && cxxrun_rank(NULL) == -1, "NULL handle");
  cxxrun_finalize(comm);
  cxxrun_finalize(NULL);
  printf("rank %d: C API %s\n", rank, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
