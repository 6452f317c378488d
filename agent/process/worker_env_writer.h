// The environment a worker is started with: the agent's own environment plus
// torchrun's per-worker variables (docs/torchrun-compat.md §3).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/config.h"

namespace cxxrun::agent {

// Where one worker sits in the job for this attempt: its own ranks, and
// its node's place in the round (rendezvous::Assignment, which the
// supervisor holds; agent::Config is only what the user asked for).
struct WorkerPlace {
  int local_rank = 0;
  int rank = 0;
  int world_size = 1;
  int restart_count = 0;
  std::string error_file;  // "" when log files are off
  std::string job_token;   // CXXRUN_JOB_TOKEN: lets the agent find every descendant
  int group_rank = 0;
  int group_world_size = 1;
  std::string master_addr;
  int master_port = 0;
};

using EnvMap = std::map<std::string, std::string>;

// Reads the current process environment.
EnvMap current_environment();

EnvMap worker_environment(const Config& config, const WorkerPlace& place, const EnvMap& base);

// "K=V" strings for execve.
std::vector<std::string> to_envp(const EnvMap& env);

// Replaces every "${local_rank}" in each argument.
std::vector<std::string> substitute_local_rank(const std::vector<std::string>& args, int local_rank);

}  // namespace cxxrun::agent
