#include <catch2/catch.hpp>

#include "agent/process/worker_env_writer.h"

using namespace cxxrun::agent;

TEST_CASE("worker environment: torchrun variables on top of the agent's") {
  Config c;
  c.nproc_per_node = 4;
  c.max_restarts = 2;
  c.run_id = "job";
  c.extra_env = {{"OMP_NUM_THREADS", "1"}};
  WorkerPlace p{2, 2, 4, 1, "/logs/attempt_1/2/error.json", "tok:1", 0, 1, "", 0};
  p.master_port = 1234;  // the round's, not the config's
  auto env = worker_environment(c, p, {{"PATH", "/bin"}, {"RANK", "stale"}});
  CHECK(env["PATH"] == "/bin");
  CHECK(env["RANK"] == "2");
  CHECK(env["LOCAL_RANK"] == "2");
  CHECK(env["WORLD_SIZE"] == "4");
  CHECK(env["LOCAL_WORLD_SIZE"] == "4");
  CHECK(env["GROUP_WORLD_SIZE"] == "1");
  CHECK(env["MASTER_PORT"] == "1234");
  CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "1");
  CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
  CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "False");
  CHECK(env["TORCHELASTIC_ERROR_FILE"] == "/logs/attempt_1/2/error.json");
  CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1");
  CHECK(env["OMP_NUM_THREADS"] == "1");
  CHECK(env["CXXRUN_JOB_TOKEN"] == "tok:1");
}

TEST_CASE("an agent's TORCH_NCCL_ASYNC_ERROR_HANDLING is kept") {
  Config c;
  auto env = worker_environment(c, WorkerPlace{}, {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}});
  CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3");
}

TEST_CASE("${local_rank} is substituted in every argument") {
  auto out = substitute_local_rank({"--rank=${local_rank}", "x${local_rank}y${local_rank}", "plain"}, 3);
  CHECK(out == std::vector<std::string>{"--rank=3", "x3y3", "plain"});
}
