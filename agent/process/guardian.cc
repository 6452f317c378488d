#include "agent/process/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "agent/process/cgroup.h"
#include "agent/process/process_tree.h"

namespace cxxrun::agent {
namespace {

// What the agent tells the guardian, one message each (a SOCK_SEQPACKET
// socket: a message arrives whole or not at all, whatever kills the agent
// while it sends): a kind, then a path.
constexpr char kLetGo = 'x';       // the agent exits normally and cleans up after itself
constexpr char kMakeDir = 'm';     // mkdtemp this template and answer its path
constexpr char kMadeDir = 'd';     // a directory the agent made itself
constexpr char kJobCgroup = 'k';   // the job's cgroup: killed before the token sweep
constexpr char kOtherCgroup = 'c'; // another cgroup tree: removed after it
// The guardian's answer to kMakeDir: '+' and the path, or '-' and errno.
constexpr size_t kMaxMessage = PATH_MAX + 2;

struct Guarded {
  std::vector<std::string> dirs;
  std::vector<std::string> job_cgroups;
  std::vector<std::string> cgroups;
};

// Makes the directory and answers with its name. One the agent will never
// learn of (it died meanwhile, or stopped waiting) goes at once; one it
// learns of goes if it dies.
void make_dir(int sock, std::string path, Guarded& guarded) {
  std::string answer;
  const bool made = mkdtemp(path.data()) != nullptr;
  answer = made ? "+" + path : "-" + std::to_string(errno);
  if (send(sock, answer.data(), answer.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(answer.size())) {
    if (made) guarded.dirs.push_back(path);
  } else if (made) {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
}

[[noreturn]] void guardian_main(int sock, const std::string& token_prefix) {
  // Terminal signals are for the agent to handle and forward; the guardian
  // must stay alive until the agent is gone.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGUSR1, SIGUSR2, SIGPIPE})
    signal(sig, SIG_IGN);
  // A session (and process group) of its own: `kill -9 -<agent pid>`, what
  // `timeout -s KILL` and many schedulers send, must not take the guardian
  // with the agent, or nothing is left to clean up after both.
  setsid();
  prctl(PR_SET_NAME, "cxxrun-guardian");
  // Messages until kLetGo (the agent cleans up after itself) or the end of
  // the connection (the agent died): the agent's whole life.
  Guarded guarded;
  bool agent_died = true;
  std::vector<char> buffer(kMaxMessage);
  for (;;) {
    const ssize_t n = recv(sock, buffer.data(), buffer.size(), MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (static_cast<size_t>(n) > buffer.size()) continue;  // no path of ours
    const char kind = buffer[0];
    std::string path(buffer.data() + 1, static_cast<size_t>(n) - 1);
    if (kind == kLetGo) {
      agent_died = false;
      break;
    }
    if (kind == kMakeDir) make_dir(sock, std::move(path), guarded);
    if (kind == kMadeDir) guarded.dirs.push_back(std::move(path));
    if (kind == kJobCgroup) guarded.job_cgroups.push_back(std::move(path));
    if (kind == kOtherCgroup) guarded.cgroups.push_back(std::move(path));
  }
  // Killing goes first, so the cgroups are empty when they are removed.
  for (const std::string& cgroup : guarded.job_cgroups)
    if (agent_died && !kill_and_remove_cgroup(cgroup))
      dprintf(2, "cxxrun-guardian: cannot remove the job's cgroup %s: %s\n", cgroup.c_str(), strerror(errno));
  // Repeat: a process may fork while we sweep.
  for (int round = 0; round < 5; ++round) {
    if (signal_processes_with_env(token_prefix, SIGKILL) == 0) break;
    usleep(10000);
  }
  for (const std::string& cgroup : guarded.cgroups)
    if (agent_died && !kill_and_remove_cgroup(cgroup))
      dprintf(2, "cxxrun-guardian: cannot remove the job's cgroup %s: %s\n", cgroup.c_str(), strerror(errno));
  std::error_code ignored;
  for (const std::string& dir : guarded.dirs)
    if (agent_died) std::filesystem::remove_all(dir, ignored);
  _exit(0);
}

}  // namespace

Guardian::Guardian(const std::string& token_prefix) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair: ") + strerror(errno));
  pid_ = fork();
  if (pid_ < 0) {
    close(fds[0]), close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  if (pid_ == 0) {
    close(fds[0]);
    // Drop every other inherited descriptor so the guardian holds no pipe
    // or socket of the agent open.
    int keep = fds[1] == 3 ? 3 : dup2(fds[1], 3);
    close_range(4, ~0U, 0);
    guardian_main(keep, token_prefix);
  }
  close(fds[1]);
  sock_ = fds[0];
}

bool Guardian::tell(char kind, const std::string& path) {
  if (sock_ < 0) return false;
  std::string message(1, kind);
  message += path;
  if (message.size() > kMaxMessage) return false;
  ssize_t n;
  while ((n = send(sock_, message.data(), message.size(), MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(message.size());
}

namespace {

// The guardian's answer to kMakeDir, waited for until `deadline`: "+path"
// or "-errno"; "" when none came.
std::string answer(int sock, std::chrono::steady_clock::time_point deadline) {
  std::vector<char> buffer(kMaxMessage);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{sock, POLLIN, 0};
    (void)poll(&p, 1, static_cast<int>(std::max<long long>(left.count() + 1, 0)));
    const ssize_t n = recv(sock, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) return std::string(buffer.data(), static_cast<size_t>(n));
    if (n == 0 || (errno != EAGAIN && errno != EINTR) || left.count() <= 0) return "";
  }
}

}  // namespace

std::string Guardian::make_temp_dir(const std::string& tmpl) {
  if (answering_ && tell(kMakeDir, tmpl)) {
    std::string got = answer(sock_, std::chrono::steady_clock::now() + kAnswerLimit);
    if (got.empty()) {
      // No more answers: one sent from now on fails, and the guardian
      // removes the directory it made. One already sent is read here.
      shutdown(sock_, SHUT_RD);
      got = answer(sock_, std::chrono::steady_clock::now());
      answering_ = false;
      if (got.empty())
        spdlog::warn("the guardian process (pid {}) did not answer within {} s (stopped, or gone); the agent makes "
                     "its temporary directories itself, and one it is killed while making may be left behind",
                     pid_, kAnswerLimit.count());
    }
    if (got.size() > 1 && got[0] == '+') return got.substr(1);
    if (got.size() > 1 && got[0] == '-') {
      errno = atoi(got.c_str() + 1);
      return "";
    }
  }
  std::string made = tmpl;
  if (mkdtemp(made.data()) == nullptr) return "";
  tell(kMadeDir, made);
  return made;
}

void Guardian::guard_cgroup(const std::string& path, bool job_cgroup) {
  if (!path.empty()) tell(job_cgroup ? kJobCgroup : kOtherCgroup, path);
}

void Guardian::let_go() {
  if (sock_ >= 0) {
    tell(kLetGo, "");
    close(sock_);
  }
  sock_ = -1;
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
