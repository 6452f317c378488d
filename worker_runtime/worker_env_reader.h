// What a worker started by cxxrun (or torchrun) learns from its environment.
// The collectives and the store connection build on this (later issues).
#pragma once

#include <stdexcept>
#include <string>

namespace cxxrun::worker {

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  std::string error_file;  // "" when the launcher keeps no error files
};

// Thrown when a variable is missing or malformed; the message names it and
// asks whether the program was started by cxxrun.
struct EnvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

WorkerEnv read_worker_env();

}  // namespace cxxrun::worker
