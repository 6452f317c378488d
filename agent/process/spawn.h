// Starting one process by exec: its own session (so a signal to its process
// group reaches its whole tree), PR_SET_PDEATHSIG so it dies with the agent,
// stdout/stderr on the descriptors given (agent/workers/worker_stdio.h), nothing
// else of the agent's open.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/numa/worker_binding.h"

namespace cxxrun::agent {

// The cgroup a worker starts in (agent/process/cgroup.h), so nothing it starts
// escapes it: descriptors of its directory and of its cgroup.procs.
struct CgroupTarget {
  int dir = -1;
  int procs = -1;
};
void close_target(CgroupTarget& target);

// With `cgroup`, the worker is born in it (clone3's CLONE_INTO_CGROUP: as
// cheap as a fork, where moving a process costs the kernel a grace period),
// or moves itself there first where clone3 is refused (some seccomp
// profiles).
struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  int stdin_fd = -1;  // -1: the agent's
  int stdout_fd = -1;
  int stderr_fd = -1;
  const CgroupTarget* cgroup = nullptr;
  // Given to the process as descriptor 3 (the forkserver's socket); -1: none.
  int pass_fd = -1;
  // A cgroup.procs of another hierarchy (a v1 memory cgroup) the child
  // joins before exec, when it can; -1: none.
  int memory_procs = -1;
  // A start gate shared by a group's children: each closes `gate_writer`,
  // then waits for end of file on `gate` (at most kGateLimit) before it
  // joins any cgroup. A v1 cgroup move holds the kernel's cgroup lock
  // through a grace period, which would stall the group's next forks; the
  // gate lets every fork happen first, and the moves then share one grace
  // period. -1: no gate.
  int gate = -1;
  int gate_writer = -1;
  // --numa-binding's CPUs and memory, taken before exec; nullptr: none.
  const BindingMasks* binding = nullptr;
  // Starts under SCHED_IDLE, its session's autogroup at nice 19: a
  // learning forkserver, which must not slow the running workers
  // (agent/warm/forkserver.h); it returns to normal priority itself.
  bool idle = false;
};

// How long a child waits at its start gate, at most.
constexpr int kGateLimitMs = 1000;

// Returns the pid. Throws std::runtime_error naming the program when it
// cannot be started (fork failure, or exec failure reported back by the
// child).
pid_t spawn_process(const SpawnRequest& request);

// spawn_process in two halves, so that a group's forks need not wait for
// each other's exec: begin_spawn forks (throwing on a fork that fails) and
// returns at once; finish_spawn waits until the child has exec'd, or
// throws what spawn_process throws when it could not. Each begun spawn is
// finished exactly once. A child's own start (joining a v1 cgroup costs the
// kernel a grace period, then the exec) thereby overlaps the next forks.
struct PendingSpawn {
  pid_t pid = -1;
  int report = -1;  // the child's report pipe; -1: nothing to wait for
  std::string program;
};
PendingSpawn begin_spawn(const SpawnRequest& request);
pid_t finish_spawn(PendingSpawn& pending);

}  // namespace cxxrun::agent
