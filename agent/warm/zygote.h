// The agent's end of the forkserver (--start-method=forkserver; the Python
// side is agent/python/zygote.py, the design docs/forkserver.md). One interpreter
// per node and job imports the preload list while the rendezvous runs, then
// forks each Python worker on request, so a restart costs a fork instead of
// an interpreter start and `import torch`.
//
// A forked worker is re-parented to the agent (a child subreaper) and moves
// itself into the attempt's cgroup before any user code runs: the agent
// supervises it like a worker it started by exec.
//
// Thread rule: one thread (the agent's loop). Calls block only on the local
// socket, and each has a deadline; a zygote that misses one is given up.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/process/spawn.h"

namespace cxxrun::agent {

class Zygote {
 public:
  enum class State { preloading, ready, gone };
  // The first attempt waits this long for the preload, then starts by exec.
  static constexpr std::chrono::seconds kPreloadDeadline{60};

  // Starts the interpreter with `envp` (the agent's, with nothing of any one
  // worker) in `cgroup` (nullptr: the agent's). `idle`: it preloads at idle
  // priority, beside running workers, and has no first attempt to serve
  // (agent/python/zygote.py). Its PYTHONPATH starts with a private directory
  // (mkdtemp, under TMPDIR) holding a sitecustomize of its own, so that the
  // user's sitecustomize and usercustomize run in each worker, not once in
  // the zygote; the zygote removes it as it starts. Throws
  // std::runtime_error.
  Zygote(const ForkserverOptions& options, const std::vector<std::string>& envp, const CgroupTarget* cgroup,
         bool idle);
  // Closes the socket, which ends the zygote, and kills it if still there.
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  State state() const { return state_; }
  pid_t pid() const { return pid_; }
  // Readable once the zygote finished its preload (or died).
  int fd() const { return fd_; }
  // Why it is gone ("" while it is not).
  const std::string& why_gone() const { return why_gone_; }
  // Reads the ready line; call when fd() is readable.
  void read_ready();

  struct Fork {
    std::vector<std::string> argv;  // python, -u, and a script, -m module or -c code
    std::vector<std::string> envp;
    std::string cwd;
    int stdout_fd = -1;
    int stderr_fd = -1;
    int cgroup_procs = -1;  // the attempt's cgroup.procs; -1: none
    const NumaPlacement* binding = nullptr;  // --numa-binding; nullptr: none
  };
  // Forks a worker and returns its pid, already the agent's child; -1 with
  // the reason in `why` when the zygote refused (unsafe to fork) or is gone.
  pid_t fork_worker(const Fork& request, std::string& why);

  // The agent reaped the zygote: it is gone.
  void exited(int wait_status);
  // Stops using it and kills it.
  void give_up(const std::string& why);

 private:
  // The next line from the zygote, or "" with why_gone_ set.
  std::string read_line(std::chrono::milliseconds deadline);

  pid_t pid_ = -1;
  int fd_ = -1;
  State state_ = State::preloading;
  std::string why_gone_;
  std::string buffer_;
  std::chrono::steady_clock::time_point started_;
  std::string own_site_;  // the private directory; removed again at the end if the zygote did not
};

}  // namespace cxxrun::agent
