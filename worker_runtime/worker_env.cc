#include "worker_runtime/worker_env.h"

#include <charconv>
#include <cstdlib>

namespace cxxrun::worker {
namespace {

const char* required(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw EnvError(std::string(name) + " is not set: was this program started by cxxrun?");
  return v;
}

int to_int(const char* name, const char* text) {
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 0)
    throw EnvError(std::string(name) + "=" + text + " is not a non-negative integer");
  return value;
}

int int_var(const char* name) { return to_int(name, required(name)); }

int int_var_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? to_int(name, v) : fallback;
}

}  // namespace

WorkerEnv read_worker_env() {
  WorkerEnv e;
  e.rank = int_var("RANK");
  e.world_size = int_var("WORLD_SIZE");
  e.local_rank = int_var("LOCAL_RANK");
  e.local_world_size = int_var_or("LOCAL_WORLD_SIZE", 1);
  e.group_rank = int_var_or("GROUP_RANK", 0);
  e.restart_count = int_var_or("TORCHELASTIC_RESTART_COUNT", 0);
  e.max_restarts = int_var_or("TORCHELASTIC_MAX_RESTARTS", 0);
  e.master_addr = required("MASTER_ADDR");
  e.master_port = int_var("MASTER_PORT");
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  e.run_id = run_id ? run_id : "none";
  const char* error_file = std::getenv("TORCHELASTIC_ERROR_FILE");
  e.error_file = error_file ? error_file : "";
  if (e.rank >= e.world_size)
    throw EnvError("RANK=" + std::to_string(e.rank) + " is not below WORLD_SIZE=" + std::to_string(e.world_size));
  return e;
}

}  // namespace cxxrun::worker
