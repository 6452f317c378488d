#include "agent/health/check_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include <spdlog/spdlog.h>

#include "agent/process/open_files.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- The runner: a fork of a threaded agent, so only async-signal-safe
// calls from here to its _exit (no allocation, no locks, no stdio).

struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

void pause_ms(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// /proc/<name>'s parent, from "pid (comm) S ppid ..."; -1 when it is gone.
pid_t parent_of(const char* name) {
  char path[64] = "/proc/";
  size_t n = 6;
  for (const char* s = name; *s != 0 && n < sizeof path - 8; ++s) path[n++] = *s;
  memcpy(path + n, "/stat", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  const ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return -1;
  buf[got] = 0;
  const char* p = strrchr(buf, ')');  // a command name may hold ')' and spaces; the last one ends it
  if (p == nullptr || p[1] != ' ' || p[2] == 0 || p[3] != ' ') return -1;
  pid_t parent = 0;
  for (p += 4; *p >= '0' && *p <= '9'; ++p) parent = parent * 10 + (*p - '0');
  return parent;
}

pid_t pid_named(const char* name) {
  pid_t pid = 0;
  for (const char* s = name; *s != 0; ++s) {
    if (*s < '0' || *s > '9' || pid > (1 << 26)) return 0;
    pid = pid * 10 + (*s - '0');
  }
  return pid;
}

// SIGKILL to every child of this process (being a subreaper, every process
// left of the command's tree becomes one as the ones above it die).
void kill_children() {
  const pid_t self = getpid();
  const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[8192];
  for (long n; (n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->d_reclen;
      const pid_t pid = pid_named(d->d_name);
      if (pid > 0 && parent_of(d->d_name) == self) kill(pid, SIGKILL);
    }
  }
  close(dir);
}

// The command's process group at once, then whatever left it, level by
// level, until nothing is left to reap. About 5 s at most: a process stuck
// in the kernel stays, and passes to the agent when the runner exits.
void kill_tree(pid_t shell) {
  kill(-shell, SIGKILL);
  kill(shell, SIGKILL);
  for (int round = 0; round < 1000; ++round) {
    kill_children();
    pid_t reaped;
    while ((reaped = waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (reaped < 0 && errno == ECHILD) return;
    pause_ms(round < 20 ? 1 : 10);
  }
}

// Closes every descriptor from 3 up but the `keep` ones (-1: none).
void close_all_but(int a, int b, int c) {
  int keep[3] = {a, b, c};
  std::sort(keep, keep + 3);
  unsigned from = 3;
  for (int k : keep) {
    if (k < 3) continue;
    if (static_cast<unsigned>(k) > from) close_range(from, static_cast<unsigned>(k) - 1, 0);
    from = static_cast<unsigned>(k) + 1;
  }
  close_range(from, ~0U, 0);
}

[[noreturn]] void exec_shell(const char* command, int out_w, int err_w) {
  setpgid(0, 0);
  dup2(out_w, STDOUT_FILENO);
  dup2(err_w, STDERR_FILENO);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull > STDIN_FILENO) dup2(devnull, STDIN_FILENO);
  close_range(3, ~0U, 0);
  execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
  _exit(127);
}

// Waits until the agent closes its end of `control` (done with the check,
// stopping it, or dead), writing the shell's wait status into `status_w`
// when it ends; then kills the tree. Each wait is bounded by the agent's:
// it closes `control` by the check's timeout, or the kernel does when the
// agent dies.
[[noreturn]] void runner_main(const char* command, int out[2], int err[2], int status[2], int control[2]) {
  close(out[0]), close(err[0]), close(status[0]), close(control[1]);
  setpgid(0, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  prctl(PR_SET_NAME, "cxxrun-check");
  // Not the agent's handlers (its event loop's), nor what it ignores.
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  restore_open_files();
  const pid_t shell = fork();
  if (shell == 0) exec_shell(command, out[1], err[1]);
  if (shell > 0) setpgid(shell, shell);
  close(out[1]), close(err[1]);
  const int pidfd = shell > 0 ? static_cast<int>(syscall(SYS_pidfd_open, shell, 0)) : -1;
  close_all_but(control[0], status[1], pidfd);
  if (shell < 0) _exit(1);
  (void)!write(status[1], &shell, sizeof shell);
  bool ended = false;
  for (;;) {
    pollfd p[2] = {{control[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
    const bool watch_shell = !ended && pidfd >= 0;
    const int n = poll(p, watch_shell ? 2 : 1, ended || watch_shell ? 1000 : 10);
    if (!ended) {
      int st = 0;
      pid_t got;
      while ((got = waitpid(shell, &st, WNOHANG)) < 0 && errno == EINTR) {
      }
      if (got == shell) {
        (void)!write(status[1], &st, sizeof st);
        ended = true;
      }
    }
    if (n > 0 && p[0].revents != 0) break;
  }
  kill_tree(shell);
  _exit(0);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

ContainedCommand::ContainedCommand(const char* command) {
  int out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1}, control[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out, err, status, control}) close_fd(p[0]), close_fd(p[1]);
  };
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0 ||
      pipe2(control, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    throw std::system_error(e, std::generic_category(), "pipe");
  }
  runner_ = fork();
  if (runner_ == 0) runner_main(command, out, err, status, control);
  if (runner_ < 0) {
    const int e = errno;
    close_all();
    throw std::system_error(e, std::generic_category(), "fork");
  }
  close_fd(out[1]), close_fd(err[1]), close_fd(status[1]), close_fd(control[0]);
  fcntl(status[0], F_SETFL, O_NONBLOCK);
  out_ = out[0], err_ = err[0], status_ = status[0], control_ = control[1];
}

ContainedCommand::~ContainedCommand() { end(); }

std::optional<int> ContainedCommand::read_status() {
  while (status_ >= 0 && have_ < sizeof got_) {
    const ssize_t n = ::read(status_, got_ + have_, sizeof got_ - have_);
    if (n > 0) {
      have_ += static_cast<size_t>(n);
    } else if (n == 0) {
      runner_gone_ = true;
      break;
    } else if (errno != EINTR) {
      break;
    }
  }
  if (have_ >= sizeof(int) && shell_ < 0) memcpy(&shell_, got_, sizeof(int));
  if (have_ < sizeof got_) return std::nullopt;
  int status;
  memcpy(&status, got_ + sizeof(int), sizeof status);
  return status;
}

bool ContainedCommand::gone_now() {
  if (runner_gone_ || status_ < 0) return runner_gone_;
  read_status();  // the words first: the shell's pid is the last resort's target
  char discard[64];
  ssize_t n;
  while ((n = ::read(status_, discard, sizeof discard)) > 0) {
  }
  if (n == 0) runner_gone_ = true;
  return runner_gone_;
}

void ContainedCommand::end(milliseconds limit) {
  if (runner_ < 0) return;
  // Only while it holds the pipe is its pid surely still its own.
  if (!gone_now()) kill(runner_, SIGCONT);  // the command may have stopped it
  close_fd(control_);
  const auto deadline = Clock::now() + limit;
  while (!gone_now() && status_ >= 0) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{status_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) break;
  }
  if (!runner_gone_) {
    spdlog::warn("the health check's runner (pid {}) did not end within {} s of its end; killing it and the "
                 "command's process group",
                 runner_, limit.count() / 1000.0);
    if (shell_ > 0) kill(-shell_, SIGKILL);
    kill(runner_, SIGKILL);
  }
  // Gone by now, or SIGKILLed; unless the agent's own reaping took it first.
  while (waitpid(runner_, nullptr, 0) < 0 && errno == EINTR) {
  }
  runner_ = -1;
  close_fd(out_), close_fd(err_), close_fd(status_);
}

}  // namespace cxxrun::agent
