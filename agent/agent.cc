#include "agent/agent.h"

#include <pthread.h>
#include <unistd.h>
#include <signal.h>
#include <sys/prctl.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>
#include <vector>
#include <spdlog/spdlog.h>

#include "agent/process/cgroup.h"
#include "agent/process/guardian.h"
#include "agent/report/event_log.h"
#include "agent/warm/forkserver.h"
#include "agent/workers/log_dir.h"
#include "agent/health/node_health.h"
#include "agent/process/open_files.h"
#include "agent/forensics/postmortem.h"
#include "agent/process/private_files.h"
#include "agent/process/stale_temp_dirs.h"
#include "agent/process/tree_removal.h"
#include "agent/python/hook.h"
#include "agent/restart_policy.h"
#include "agent/supervisor.h"
#include "common/env_names.h"
#include "rendezvous/backends.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/worker_store.h"

namespace cxxrun::agent {
namespace {

std::string random_token() {
  std::random_device rd;
  char buf[33];
  snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

rendezvous::WorkerStorePlan worker_store_plan(const Config& c) {
  return {c.use_agent_store, c.master_addr, c.master_port, c.nproc_per_node};
}

// `said`: which way this agent keeps every process of the job inside it,
// logged once the node has joined: bad input the join finds (a port the
// user named, taken) stays the one line on stderr.
std::unique_ptr<JobCgroup> contain(const Config& config, const std::string& token, Guardian& guardian,
                                   std::string& said) {
  std::string why_not = "turned off (CXXRUN_CONTAINMENT=subreaper)";
  std::unique_ptr<JobCgroup> cgroup =
      config.use_cgroup
          ? JobCgroup::create(token, why_not, [&](const std::string& path) { guardian.guard_cgroup(path, true); })
          : nullptr;
  if (cgroup)
    said = "containment: the job's processes live in cgroup " + cgroup->path();
  else
    said = "containment: no cgroup (" + why_not + "); the agent finds the job's processes as their child subreaper";
  return cgroup;
}

// Where the hook lives when the run directory does not: removed at exit,
// after a SIGKILL by the guardian, and after a SIGKILL of both by the next
// agent's start (agent/process/stale_temp_dirs.h).
struct HookDir {
  std::string removed_at_exit;
  HookDir() = default;
  HookDir(const HookDir&) = delete;
  HookDir& operator=(const HookDir&) = delete;
  ~HookDir() {
    std::error_code ignored;
    if (!removed_at_exit.empty()) std::filesystem::remove_all(removed_at_exit, ignored);
  }
};

// At a normal exit the run's temporary directories go on a thread of their
// own, joined when this goes, while the agent's thread removes the cgroups:
// each rmdir may wait for its file system (a journal commit), each cgroup's
// for the kernel, and neither needs the other.
class DirRemoval {
 public:
  void start(std::vector<std::string> dirs) {
    thread_ = std::jthread([dirs = std::move(dirs)] {
      for (const std::string& dir : dirs) remove_tree(dir);
    });
  }

 private:
  std::jthread thread_;
};

// Temporary directories of agents killed together with their guardian (a
// scheduler's SIGKILL of the whole step): nothing else removes them. Every
// base their makers may choose (safe_temp_base's, and /dev/shm) is looked in.
void sweep_temp_dirs_of_gone_agents() {
  const char* tmpdir = getenv("TMPDIR");
  std::vector<std::string> bases;
  for (const char* base : {tmpdir, "/tmp", "/dev/shm"})
    if (base && *base && std::find(bases.begin(), bases.end(), base) == bases.end()) bases.push_back(base);
  int removed = 0;
  for (const std::string& base : bases)
    for (const char* prefix : kOwnedTempDirPrefixes) removed += remove_stale_temp_dirs(base, prefix);
  if (removed > 0) spdlog::info("removed {} temporary directories left by agents that are gone", removed);
}

// Every Python process of the job, the forkserver included, reads cxxrun's
// sitecustomize (agent/python/hook.h): the stack dump a hang verdict takes,
// and the `cxxrun` package beside it, which a worker's `import cxxrun` finds
// whatever --log-dir is. Workers execute them at every start, so they are
// kept where no other user can put others in their place: the run
// directory's python/, unless the run directory sits in one that another
// user can change (a --log-dir others can write without the sticky bit, or
// one of its parents), where they could move the run directory aside and
// make their own; then, as with no run directory at all (--log-dir=/dev/null),
// a private temporary directory that nobody else can replace. A temporary
// run directory's hook goes to such a directory in /dev/shm.
void hook_python(const LogDir& logs, Guardian& guardian, HookDir& temporary) {
  std::string dir;
  std::string unsafe;
  if (logs.enabled()) {
    dir = logs.run_dir() + "/python";
    unsafe = replaceable_by_others(logs.run_dir());
  }
  const bool elsewhere = dir.empty() || !unsafe.empty();
  std::string base = elsewhere ? safe_temp_base() : "";
  // A temporary run directory goes at exit, and nobody reads the hook's copy
  // in it: on a memory file system its four directories cost no disk (a
  // directory removed from a disk mounted with discard waits for the device,
  // milliseconds each, on the agent's way out).
  if (!elsewhere && !logs.removed_at_exit().empty() && access("/dev/shm", W_OK | X_OK) == 0 &&
      replaceable_by_others("/dev/shm").empty())
    base = "/dev/shm";
  // Made by the guardian: an agent killed the moment it exists (a test that
  // waits for it to appear) leaves nothing behind.
  const std::string made = base.empty() ? "" : guardian.make_temp_dir(owned_temp_template(base, kHookDirPrefix));
  if (!made.empty()) {
    temporary.removed_at_exit = made;
    dir = made + "/python";
  } else if (elsewhere) {
    spdlog::warn("{} and there is no private temporary directory for cxxrun's Python hook; Python workers cannot "
                 "import cxxrun unless it is installed, and their stacks cannot be taken at a hang",
                 unsafe.empty() ? "there is no log directory" : unsafe + " can be changed by other users");
    return;
  }
  std::string why_not;
  if (!install_python_hook(dir, why_not)) {
    spdlog::warn("{}; Python workers cannot import cxxrun unless it is installed, and their stacks cannot be taken "
                 "at a hang",
                 why_not);
    return;
  }
  const char* current = getenv("PYTHONPATH");
  setenv("PYTHONPATH", python_path_with(dir, current ? current : "").c_str(), 1);
}

// A node that failed a check before its first round: it says why (the log,
// the event log, --exclude-file, and the rendezvous, so that the others
// stop waiting for it) and never joins.
int step_out(const Config& config, const CheckResult& failed) {
  EventLog events(config.event_log, config.event_log_console);
  events.context() = event_context(config, rendezvous::Assignment{});
  const std::string line =
      step_out_of_job(*spdlog::default_logger(), config, failed, false,
                      [&](const std::string& check, const std::string& l) { events.node_unhealthy(check, l); });
  rendezvous::make_rendezvous(config.rdzv, worker_store_plan(config))->decline(line);
  Situation unhealthy;
  unhealthy.cause = Cause::unhealthy;
  return decide(unhealthy).code;
}

// A signal stopped the checks before the node ever joined: the job ends
// here, with the code the policy gives a signal.
int signalled_before_joining(int sig) {
  Situation signalled;
  signalled.cause = Cause::signal;
  signalled.signal = sig;
  const int code = decide(signalled).code;
  spdlog::info("exiting with code {}", code);
  return code;
}

}  // namespace

int run(const Config& input) {
  AgentStart start;  // goodput counts this node's wall time from here (agent/progress/goodput.h)
  const Config& config = input;
  // Console writes must fail with EPIPE rather than kill the agent.
  signal(SIGPIPE, SIG_IGN);
  // Orphaned grandchildren are reparented to us, so they can be found and
  // reaped instead of escaping to init.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) spdlog::warn("cannot become a child subreaper");
  const rlim_t open_files = raise_open_files();
  const std::string token = random_token();
  // Before anything else: a node unfit for the job does not join it, so a
  // waiting spare takes its place in the first round. The signals that end
  // a job are blocked from here until the checks are done, so that threads
  // started meanwhile (NVML's) never take them, and one that comes during
  // the checks stops them and ends the agent by its normal path.
  sigset_t ending, unblocked;
  sigemptyset(&ending);
  for (int sig : config.signals_to_handle) sigaddset(&ending, sig);
  pthread_sigmask(SIG_BLOCK, &ending, &unblocked);
  NodeHealth health(config);
  if (!health.empty()) {
    int received = 0;
    const auto results = health.check_or_signal(config.signals_to_handle, config.forward_only_signals, received);
    if (received != 0) return signalled_before_joining(received);
    if (const CheckResult* failed = first_failure(results)) {
      pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
      return step_out(config, *failed);
    }
  }
  // The signals cxxrun only forwards (Slurm's SIGUSR1) stay blocked until
  // the loop that forwards them listens (SignalWatch::start), then reach
  // the workers: one that came during the rendezvous, before any handler,
  // killed the agent (SIGUSR1's default action) and with it the job.
  sigset_t held = unblocked;
  for (int sig : config.forward_only_signals) sigaddset(&held, sig);
  pthread_sigmask(SIG_SETMASK, &held, nullptr);
  // Declared first, so ended last: at a normal exit the guardian's sweep
  // runs while the agent removes the rest below, and the agent waits for
  // it only at the very end. Started before anything it removes after a
  // SIGKILL is made, and told of each as it is made (agent/process/guardian.h).
  Guardian guardian(std::string(env::kJobToken) + "=" + token + ":");
  DirRemoval removal;  // joined after the cgroups went, before the guardian's wait
  LogDir logs(config, &guardian);
  std::string containment;
  std::unique_ptr<JobCgroup> cgroup = contain(config, token, guardian, containment);
  sweep_temp_dirs_of_gone_agents();
  HookDir hook_dir;
  hook_python(logs, guardian, hook_dir);
  Postmortem postmortem(token);
  guardian.guard_cgroup(postmortem.memory_dir(), false);  // made later, one per rank
  // Before the rendezvous: an explicit forkserver's preload overlaps the
  // wait for the other nodes.
  Forkserver forkserver(config, token, cgroup.get());
  auto rdzv = rendezvous::make_rendezvous(config.rdzv, worker_store_plan(config));
  rendezvous::Assignment first;
  try {
    start.join_began = std::chrono::steady_clock::now();
    first = rdzv->join();
    start.joined = std::chrono::steady_clock::now();
  } catch (const rendezvous::RendezvousClosed& e) {
    spdlog::info("{}; exiting", e.what());
    Situation released;
    released.cause = Cause::released;
    return decide(released).code;
  } catch (const rendezvous::PortTaken& e) {
    // Another job took the port the user named since the launcher looked:
    // the same bad input as if it had been taken then.
    std::cerr << "cxxrun: error: "
              << rendezvous::port_taken_message(config.master_port_origin.empty()
                                                    ? "--master-port=" + std::to_string(config.master_port)
                                                    : config.master_port_origin,
                                                config.master_port, config.master_addr,
                                                config.group_world_size == 1)
              << std::endl;
    return exit_code::usage;
  } catch (const rendezvous::RendezvousError& e) {
    std::cerr << "cxxrun: " << e.what() << std::endl;
    Situation failed;
    // Too few nodes left to form the first round (one declined it, no
    // spare came): the same verdict as a lost node's later.
    failed.cause = dynamic_cast<const rendezvous::RendezvousLost*>(&e) ? Cause::lost : Cause::rendezvous_failed;
    return decide(failed).code;
  }
  spdlog::info("{}", containment);
  // Every rank connects to the workers' store this agent serves.
  if (config.use_agent_store && first.group_rank == 0 && static_cast<rlim_t>(first.world_size) + 64 > open_files)
    spdlog::warn("the workers' store can hold about {} connections (RLIMIT_NOFILE's hard limit) and the job has {} "
                 "ranks: ranks beyond it wait at init_process_group; raise the hard limit (ulimit -Hn, LimitNOFILE=)",
                 open_files - 64, first.world_size);
  const int code =
      supervise(config, first, logs, guardian, cgroup.get(), &forkserver, postmortem, health, *rdzv, token, start);
  if (code == exit_code::unkillable) {
    if (cgroup) cgroup->abandon();
    postmortem.abandon();
  }
  if (code != 0) logs.keep();
  // A node that stepped out leaves the job to the others: leave() would
  // close the rendezvous for every node.
  if (code != exit_code::node_unhealthy) rdzv->leave(code == 0);
  guardian.let_go();  // the workers are gone: its sweep overlaps the rest of the exit
  removal.start({logs.removed_at_exit(), hook_dir.removed_at_exit});
  logs.keep();  // removing now, on the removal's thread
  hook_dir.removed_at_exit.clear();
  return code;
}

}  // namespace cxxrun::agent
