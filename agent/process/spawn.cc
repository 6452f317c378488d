#include "agent/process/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>

#include "agent/process/open_files.h"

namespace cxxrun::agent {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// What the child reports on the report pipe when it cannot start.
struct StartError {
  int stage;  // 0: joining the cgroup, 1: exec, 2: CPU binding, 3: memory binding
  int error;
};

[[noreturn]] void report(int report_w, int stage) {
  const StartError e{stage, errno};
  (void)!write(report_w, &e, sizeof e);
  _exit(127);
}

// Runs in the forked child: only async-signal-safe calls from here on.
[[noreturn]] void exec_child(pid_t agent, const SpawnRequest& r, int report_w, int cgroup_procs, char** argv,
                             char** envp) {
  if (r.gate >= 0) {
    if (r.gate_writer >= 0) close(r.gate_writer);
    pollfd open{r.gate, POLLIN, 0};
    while (poll(&open, 1, kGateLimitMs) < 0 && errno == EINTR) {
    }
  }
  if (cgroup_procs >= 0 && write(cgroup_procs, "0", 1) != 1) report(report_w, 0);
  // Only evidence rides on this one: a worker that cannot join it still runs.
  if (r.memory_procs >= 0) (void)!write(r.memory_procs, "0", 1);
  if (r.binding) {
    const BindingStep failed = apply_binding(*r.binding);
    if (failed != BindingStep::none) report(report_w, failed == BindingStep::cpus ? 2 : 3);
  }
  restore_open_files();
  setsid();
  if (r.idle) {
    sched_param idle{};
    sched_setscheduler(0, SCHED_IDLE, &idle);
    const int group = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
    if (group >= 0) (void)!write(group, "19", 2), close(group);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != agent) _exit(127);  // the agent died before prctl took hold
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  // The report pipe must not land on 3 (or 1, 2) before those are set.
  if (report_w <= 3) report_w = fcntl(report_w, F_DUPFD_CLOEXEC, 4);
  if (r.stdin_fd >= 0) dup2(r.stdin_fd, STDIN_FILENO);
  dup2(r.stdout_fd, STDOUT_FILENO);
  dup2(r.stderr_fd, STDERR_FILENO);
  int first_closed = 3;
  if (r.pass_fd >= 0) {
    dup2(r.pass_fd, 3);  // dup2 clears close-on-exec
    first_closed = 4;
  }
  // Nothing of the agent's reaches the worker: not its listening sockets
  // (the stores, the health server), not its pipes. torchrun's workers start
  // the same way (Python's close_fds). The report pipe closes at exec.
  close_range(first_closed, ~0U, CLOSE_RANGE_CLOEXEC);
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

void close_target(CgroupTarget& t) {
  for (int* fd : {&t.dir, &t.procs}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

PendingSpawn begin_spawn(const SpawnRequest& r) {
  auto argv = c_strings(r.argv);
  auto envp = c_strings(r.envp);
  int report[2] = {-1, -1};
  if (pipe2(report, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create a pipe: ") + strerror(errno));
  const pid_t agent = getpid();
  bool moved = false;
  const pid_t pid = fork_into(r.cgroup, moved);
  if (pid == 0)
    exec_child(agent, r, report[1], r.cgroup && !moved ? r.cgroup->procs : -1, argv.data(), envp.data());
  const int fork_errno = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    throw std::runtime_error(std::string("fork failed: ") + strerror(fork_errno));
  }
  return {pid, report[0], r.argv.empty() ? std::string() : r.argv[0]};
}

pid_t finish_spawn(PendingSpawn& p) {
  if (p.report < 0) return p.pid;
  // The report pipe closes on a successful exec; otherwise it says why not.
  StartError e{};
  ssize_t n;
  do n = read(p.report, &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(p.report);
  p.report = -1;
  if (n == sizeof e) {
    // The child has exited 127; the agent's SIGCHLD handling reaps it.
    if (e.stage == 0) throw std::runtime_error(std::string("cannot move a worker into its cgroup: ") + strerror(e.error));
    if (e.stage == 2) throw std::runtime_error(std::string("cannot bind a worker to its CPUs (--numa-binding): ") + strerror(e.error));
    if (e.stage == 3) throw std::runtime_error(std::string("cannot bind a worker's memory to its NUMA node (--numa-binding): ") + strerror(e.error));
    throw std::runtime_error("cannot execute '" + p.program + "': " + strerror(e.error));
  }
  return p.pid;
}

pid_t spawn_process(const SpawnRequest& r) {
  PendingSpawn pending = begin_spawn(r);
  return finish_spawn(pending);
}

}  // namespace cxxrun::agent
