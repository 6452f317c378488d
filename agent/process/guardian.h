// A small process forked at agent start whose only job is to outlive the
// agent: when the agent dies for any reason, SIGKILL included, the kernel
// closes the agent's end of a pipe, and the guardian then kills every process
// of the job: everything in the job's cgroup, and everything that carries the
// job's environment token. PR_SET_PDEATHSIG alone covers only direct children. It also removes the agent's temporary log directory,
// which the agent cannot do for itself after a SIGKILL.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace cxxrun::agent {

class Guardian {
 public:
  // Forks the guardian. Call before any thread is started.
  // cleanup_dirs: removed once the agent is gone ("": nothing to remove).
  // cgroups: the job's cgroup (agent/process/cgroup.h) first, killed and removed
  // once the agent is gone ("": none, the token finds the job's processes),
  // then other cgroup trees of the job to remove (per-rank memory
  // cgroups, agent/forensics/postmortem.h).
  Guardian(const std::string& job_token_prefix, const std::vector<std::string>& cleanup_dirs,
           const std::vector<std::string>& cgroups);
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  pid_t pid() const { return pid_; }
  // How long release() waits for the guardian to end.
  static constexpr std::chrono::seconds kReleaseLimit{5};

  // Normal exit begins: the guardian starts its sweep (finding nothing) and
  // ends, leaving the cleanup directory to the agent, while the agent tears
  // down the rest. Call once the job's workers are gone. Idempotent.
  void let_go();
  // let_go(), then waits for the guardian to end, woken by its exit (a
  // pidfd), not by a timer. Bounded: a guardian stopped (SIGSTOP) is
  // continued, and one not gone within kReleaseLimit is SIGKILLed.
  void release();
  // The agent's SIGCHLD handling reaped the guardian: don't wait for it again.
  void mark_reaped() { pid_ = -1; }

 private:
  pid_t pid_ = -1;
  int pipe_w_ = -1;
};

}  // namespace cxxrun::agent
