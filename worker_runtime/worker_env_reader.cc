#include "worker_runtime/worker_env_reader.h"

#include <charconv>
#include <cstdlib>

#include "common/env_names.h"

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
  e.rank = int_var(env::kRank);
  e.world_size = int_var(env::kWorldSize);
  e.local_rank = int_var(env::kLocalRank);
  e.local_world_size = int_var_or(env::kLocalWorldSize, 1);
  e.group_rank = int_var_or(env::kGroupRank, 0);
  e.restart_count = int_var_or(env::kRestartCount, 0);
  e.max_restarts = int_var_or(env::kMaxRestarts, 0);
  e.master_addr = required(env::kMasterAddr);
  e.master_port = int_var(env::kMasterPort);
  const char* run_id = std::getenv(env::kRunId);
  e.run_id = run_id ? run_id : "none";
  const char* error_file = std::getenv(env::kErrorFile);
  e.error_file = error_file ? error_file : "";
  if (e.rank >= e.world_size)
    throw EnvError(std::string(env::kRank) + "=" + std::to_string(e.rank) + " is not below " + env::kWorldSize + "=" + std::to_string(e.world_size));
  return e;
}

}  // namespace cxxrun::worker
