// A small process forked at agent start whose only job is to outlive the
// agent: when the agent dies for any reason, SIGKILL included, the kernel
// closes the agent's end of a socket, and the guardian then kills every process
// of the job: everything in the job's cgroup, and everything that carries the
// job's environment token. PR_SET_PDEATHSIG alone covers only direct children.
// It also removes the agent's temporary directories (the temporary log
// directory, the Python hook's), which the agent cannot do for itself after a
// SIGKILL.
//
// It is forked before any of them exists, and learns of each before it can
// be left behind: a temporary directory is made by the guardian itself
// (make_temp_dir), a cgroup is named to it before it is made (guard_cgroup).
// A SIGKILL at any moment of the agent's start, even between a mkdtemp and
// the line after it, leaves nothing behind that the guardian does not know.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace cxxrun::agent {

class Guardian {
 public:
  // Forks the guardian. Call before any thread is started, and before
  // anything it is to remove is made.
  explicit Guardian(const std::string& job_token_prefix);
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  pid_t pid() const { return pid_; }
  // How long release() waits for the guardian to end.
  static constexpr std::chrono::seconds kReleaseLimit{5};
  // How long make_temp_dir() waits for the guardian's answer.
  static constexpr std::chrono::seconds kAnswerLimit{10};

  // mkdtemp(`tmpl`, ending in XXXXXX), done by the guardian, which removes
  // the directory if the agent dies; at a normal exit (let_go) the agent
  // removes it. Returns its path, or "" with errno set. Where the guardian
  // does not answer within kAnswerLimit (stopped, or gone), the agent makes
  // it itself and names it to the guardian, and says so; the guardian then
  // removes a directory whose name it could not hand back.
  std::string make_temp_dir(const std::string& tmpl);
  // A cgroup tree the guardian kills and removes if the agent dies: named
  // before it is made. The job's cgroup (agent/process/cgroup.h) is killed
  // first, before the token sweep; other trees (per-rank memory cgroups,
  // agent/forensics/postmortem.h) after it.
  void guard_cgroup(const std::string& path, bool job_cgroup);

  // Normal exit begins: the guardian starts its sweep (finding nothing) and
  // ends, leaving the temporary directories to the agent, while the agent
  // tears down the rest. Call once the job's workers are gone. Idempotent.
  void let_go();
  // let_go(), then waits for the guardian to end, woken by its exit (a
  // pidfd), not by a timer. Bounded: a guardian stopped (SIGSTOP) is
  // continued, and one not gone within kReleaseLimit is SIGKILLed.
  void release();
  // The agent's SIGCHLD handling reaped the guardian: don't wait for it again.
  void mark_reaped() { pid_ = -1; }

 private:
  // One message to the guardian: false when it is gone or let go.
  bool tell(char kind, const std::string& path);

  pid_t pid_ = -1;
  // The agent's end of a SOCK_SEQPACKET pair: messages both ways, and its
  // closing, by the kernel at the agent's death, the guardian's signal.
  int sock_ = -1;
  // False once make_temp_dir stopped waiting for an answer.
  bool answering_ = true;
};

}  // namespace cxxrun::agent
