#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "worker_runtime/error_file.h"
#include "worker_runtime/worker_env_reader.h"

using namespace cxxrun::worker;

namespace {

struct ScopedEnv {
  std::vector<std::string> names;
  void set(const char* k, const char* v) {
    setenv(k, v, 1);
    names.push_back(k);
  }
  ~ScopedEnv() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};

void set_minimal(ScopedEnv& e) {
  e.set("RANK", "1");
  e.set("WORLD_SIZE", "2");
  e.set("LOCAL_RANK", "1");
  e.set("MASTER_ADDR", "127.0.0.1");
  e.set("MASTER_PORT", "29500");
}

}  // namespace

TEST_CASE("worker env is read from the launcher's variables") {
  ScopedEnv e;
  set_minimal(e);
  e.set("TORCHELASTIC_RESTART_COUNT", "3");
  auto w = read_worker_env();
  CHECK(w.rank == 1);
  CHECK(w.world_size == 2);
  CHECK(w.master_port == 29500);
  CHECK(w.restart_count == 3);
}

TEST_CASE("missing or bad worker env names the variable") {
  ScopedEnv e;
  set_minimal(e);
  unsetenv("RANK");
  CHECK_THROWS_WITH(read_worker_env(), Catch::Contains("RANK is not set") && Catch::Contains("cxxrun"));
  e.set("RANK", "x1");
  CHECK_THROWS_WITH(read_worker_env(), Catch::Contains("RANK=x1"));
  e.set("RANK", "2");
  CHECK_THROWS_WITH(read_worker_env(), Catch::Contains("WORLD_SIZE=2"));
}

TEST_CASE("error file has torchelastic's shape") {
  char path[] = "/tmp/cxxrun_ef_XXXXXX";
  close(mkstemp(path));
  ScopedEnv e;
  e.set("TORCHELASTIC_ERROR_FILE", path);
  REQUIRE(write_error_file("boom", "stack"));
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  unlink(path);
  CHECK(j["message"]["message"] == "boom");
  CHECK(j["message"]["extraInfo"]["py_callstack"] == "stack");
  CHECK(j["message"]["extraInfo"]["timestamp"].is_string());
}

TEST_CASE("no error file configured: nothing written") {
  unsetenv("TORCHELASTIC_ERROR_FILE");
  CHECK_FALSE(write_error_file("boom"));
}
