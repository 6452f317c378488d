#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>

namespace cxxrun::agent {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void close_pair(int fds[2]) {
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
}

// What the child reports on the report pipe when it cannot start.
struct StartError {
  int stage;  // 0: joining the cgroup, 1: exec
  int error;
};

[[noreturn]] void report(int report_w, int stage) {
  const StartError e{stage, errno};
  (void)!write(report_w, &e, sizeof e);
  _exit(127);
}

// Runs in the forked child: only async-signal-safe calls from here on.
[[noreturn]] void exec_child(pid_t agent, int out_w, int err_w, int report_w, int cgroup_procs, char** argv,
                             char** envp) {
  if (cgroup_procs >= 0 && write(cgroup_procs, "0", 1) != 1) report(report_w, 0);
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != agent) _exit(127);  // the agent died before prctl took hold
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  dup2(out_w, STDOUT_FILENO);
  dup2(err_w, STDERR_FILENO);
  // Nothing of the agent's reaches the worker: not its listening sockets
  // (the stores, the health server), not its pipes. torchrun's workers start
  // the same way (Python's close_fds). The report pipe closes at exec.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvpe(argv[0], argv, envp);
  report(report_w, 1);
}

// fork(), or a fork into `cgroup` (clone3). Sets `moved` when the child is
// already in the cgroup. Returns like fork().
pid_t fork_into(const CgroupTarget* cgroup, bool& moved) {
  moved = false;
  if (cgroup && cgroup->dir >= 0) {
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(cgroup->dir);
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) {
      moved = true;
      return static_cast<pid_t>(pid);
    }
    if (errno != ENOSYS && errno != EPERM && errno != EINVAL) return -1;
  }
  return fork();
}

}  // namespace

Spawned spawn_worker(const std::vector<std::string>& argv_s, const std::vector<std::string>& envp_s,
                     const CgroupTarget* cgroup) {
  auto argv = c_strings(argv_s);
  auto envp = c_strings(envp_s);
  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    int e = errno;
    close_pair(out), close_pair(err), close_pair(report);
    throw std::runtime_error(std::string("cannot create pipes: ") + strerror(e));
  }
  const pid_t agent = getpid();
  bool moved = false;
  const pid_t pid = fork_into(cgroup, moved);
  if (pid == 0)
    exec_child(agent, out[1], err[1], report[1], cgroup && !moved ? cgroup->procs : -1, argv.data(), envp.data());
  int fork_errno = errno;
  close(out[1]), close(err[1]), close(report[1]);
  if (pid < 0) {
    close(out[0]), close(err[0]), close(report[0]);
    throw std::runtime_error(std::string("fork failed: ") + strerror(fork_errno));
  }
  // The report pipe closes on a successful exec; otherwise it says why not.
  StartError e{};
  ssize_t n;
  do n = read(report[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof e) {
    close(out[0]), close(err[0]);
    // The child has exited 127; the agent's SIGCHLD handling reaps it.
    if (e.stage == 0) throw std::runtime_error(std::string("cannot move a worker into its cgroup: ") + strerror(e.error));
    throw std::runtime_error("cannot execute '" + argv_s[0] + "': " + strerror(e.error));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return {pid, out[0], err[0]};
}

}  // namespace cxxrun::agent
