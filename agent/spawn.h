// Starting one worker process: its own session (so a signal to its process
// group reaches its whole tree), PR_SET_PDEATHSIG so it dies with the agent,
// stdout/stderr on pipes the agent reads.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace cxxrun::agent {

struct Spawned {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, close-on-exec and non-blocking
  int stderr_fd = -1;
};

// Throws std::runtime_error naming the program when it cannot be started
// (fork failure, or exec failure reported back by the child).
// `cgroup_procs` >= 0: the child moves itself into that cgroup
// (agent/cgroup.h) before anything else, so nothing it starts escapes it.
Spawned spawn_worker(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                     int cgroup_procs = -1);

}  // namespace cxxrun::agent
