// The C ABI: failures become -1/NULL plus a message, never an exception.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <thread>

#include "net/endpoint.h"
#include "worker_runtime/cxxrun_worker.h"

TEST_CASE("cxxrun_init outside cxxrun returns NULL and says why") {
  CHECK(cxxrun_init("gloo", 1) == nullptr);
  CHECK_THAT(cxxrun_last_error(), Catch::Contains("RANK is not set") && Catch::Contains("cxxrun"));
  CHECK(cxxrun_init("mpi", 1) == nullptr);
  CHECK_THAT(cxxrun_last_error(), Catch::Contains("unknown backend 'mpi'"));
  // The message is per thread.
  std::string other;
  std::thread([&] { other = cxxrun_last_error(); }).join();
  CHECK(other == "");
}

TEST_CASE("C collectives on a one-rank job") {
  const std::string port = std::to_string(cxxrun::net::pick_free_port("127.0.0.1"));
  for (auto [k, v] : {std::pair{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", port.c_str()}})
    setenv(k, v, 1);
  cxxrun_comm* comm = cxxrun_init(nullptr, 10);
  REQUIRE(comm != nullptr);
  CHECK(cxxrun_rank(comm) == 0);
  CHECK(cxxrun_size(comm) == 1);
  int64_t x[3] = {-7, 0, 9};
  CHECK(cxxrun_allreduce(comm, x, 3, CXXRUN_INT64, CXXRUN_AVG) == 0);
  CHECK((x[0] == -7 && x[2] == 9));
  CHECK(cxxrun_allreduce(comm, x, 3, CXXRUN_INT64, 9) == -1);
  CHECK_THAT(cxxrun_last_error(), Catch::Contains("unknown reduce op 9"));
  CHECK(cxxrun_broadcast(comm, x, 3, CXXRUN_BFLOAT16, 0) == -1);
  CHECK_THAT(cxxrun_last_error(), Catch::Contains("needs the NCCL backend"));
  float in = 4, out = 0;
  CHECK(cxxrun_allgather(comm, &in, &out, 1, CXXRUN_FLOAT32) == 0);
  CHECK(out == 4);
  CHECK(cxxrun_reduce_scatter(comm, &in, &out, 1, CXXRUN_FLOAT32, CXXRUN_MIN) == 0);
  CHECK(out == 4);
  CHECK(cxxrun_barrier(comm) == 0);
  cxxrun_finalize(comm);
  CHECK(cxxrun_barrier(nullptr) == -1);
  CHECK_THAT(cxxrun_last_error(), Catch::Contains("NULL"));
  for (auto k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(k);
}
