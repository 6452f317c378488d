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
// The cgroup a worker starts in (agent/cgroup.h), so nothing it starts
// escapes it: descriptors of its directory and of its cgroup.procs.
struct CgroupTarget {
  int dir = -1;
  int procs = -1;
};

// With `cgroup`, the worker is born in it (clone3's CLONE_INTO_CGROUP: as
// cheap as a fork, where moving a process costs the kernel a grace period),
// or moves itself there first where clone3 is refused (some seccomp
// profiles).
Spawned spawn_worker(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                     const CgroupTarget* cgroup = nullptr);

}  // namespace cxxrun::agent
