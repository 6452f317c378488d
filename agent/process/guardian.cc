#include "agent/process/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>

#include "agent/process/cgroup.h"
#include "agent/process/process_tree.h"

namespace cxxrun::agent {
namespace {

[[noreturn]] void guardian_main(int pipe_r, const std::string& token_prefix, const std::vector<std::string>& cleanup_dirs,
                                const std::vector<std::string>& cgroups) {
  // Terminal signals are for the agent to handle and forward; the guardian
  // must stay alive until the agent is gone.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGUSR1, SIGUSR2, SIGPIPE})
    signal(sig, SIG_IGN);
  // A session (and process group) of its own: `kill -9 -<agent pid>`, what
  // `timeout -s KILL` and many schedulers send, must not take the guardian
  // with the agent, or nothing is left to clean up after both.
  setsid();
  prctl(PR_SET_NAME, "cxxrun-guardian");
  // A byte: the agent is exiting normally and cleans up after itself.
  // End of file: the agent died.
  char byte;
  ssize_t n;
  while ((n = read(pipe_r, &byte, 1)) < 0 && errno == EINTR) {
  }
  const bool agent_died = n <= 0;
  // Killing goes first, so the cgroups are empty when they are removed.
  if (agent_died && !cgroups.empty() && !cgroups[0].empty() && !kill_and_remove_cgroup(cgroups[0]))
    dprintf(2, "cxxrun-guardian: cannot remove the job's cgroup %s: %s\n", cgroups[0].c_str(), strerror(errno));
  // Repeat: a process may fork while we sweep.
  for (int round = 0; round < 5; ++round) {
    if (signal_processes_with_env(token_prefix, SIGKILL) == 0) break;
    usleep(10000);
  }
  for (size_t i = 1; agent_died && i < cgroups.size(); ++i)
    if (!cgroups[i].empty() && !kill_and_remove_cgroup(cgroups[i]))
      dprintf(2, "cxxrun-guardian: cannot remove the job's cgroup %s: %s\n", cgroups[i].c_str(), strerror(errno));
  std::error_code ignored;
  for (const std::string& dir : cleanup_dirs)
    if (agent_died && !dir.empty()) std::filesystem::remove_all(dir, ignored);
  _exit(0);
}

}  // namespace

Guardian::Guardian(const std::string& token_prefix, const std::vector<std::string>& cleanup_dirs,
                   const std::vector<std::string>& cgroups) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  pid_ = fork();
  if (pid_ < 0) {
    close(fds[0]), close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  if (pid_ == 0) {
    close(fds[1]);
    // Drop every other inherited descriptor so the guardian holds no pipe
    // or socket of the agent open.
    int keep = fds[0] == 3 ? 3 : dup2(fds[0], 3);
    close_range(4, ~0U, 0);
    guardian_main(keep, token_prefix, cleanup_dirs, cgroups);
  }
  close(fds[0]);
  pipe_w_ = fds[1];
}

void Guardian::let_go() {
  if (pipe_w_ >= 0) {
    const char done = 'x';
    (void)!write(pipe_w_, &done, 1);
    close(pipe_w_);
  }
  pipe_w_ = -1;
  // A stopped guardian (`pkill -STOP cxxrun` reaches it too) would hold
  // the agent's exit for ever: it is continued.
  if (pid_ > 0) kill(pid_, SIGCONT);
}

namespace {

// True once the child `pid` has ended (not reaped), or is no child to wait
// for any more.
bool ended(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid;
}

// Waits up to `limit` for the child `pid` to end, woken by its exit where
// the kernel has pidfds (polled every 5 ms where not).
bool wait_ended(pid_t pid, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  bool done;
  while (!(done = ended(pid))) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const long long ms = std::min<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1,
                                             fd >= 0 ? 1000 : 5);
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      (void)poll(&p, 1, static_cast<int>(ms));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  }
  if (fd >= 0) close(fd);
  return done;
}

}  // namespace

void Guardian::release() {
  let_go();
  if (pid_ <= 0) return;
  // The job's processes are gone by now: one that has not ended its sweep
  // by the bound is killed.
  if (!wait_ended(pid_, kReleaseLimit)) {
    spdlog::warn("the guardian process (pid {}) did not end within {} s of the agent's exit (stopped, or stuck "
                 "in the kernel); killing it",
                 pid_, kReleaseLimit.count());
    kill(pid_, SIGKILL);
  }
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

Guardian::~Guardian() { release(); }

}  // namespace cxxrun::agent
