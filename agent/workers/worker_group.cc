#include "agent/workers/worker_group.h"

#include <fcntl.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/process/cgroup.h"
#include "agent/exit_codes.h"
#include "agent/hostname.h"
#include "agent/workers/log_dir.h"
#include "agent/numa/binding.h"
#include "agent/forensics/postmortem.h"
#include "agent/process/process_tree.h"
#include "agent/process/spawn.h"
#include "agent/numa/worker_binding.h"
#include "agent/workers/worker_stdio.h"
#include "common/env_names.h"
#include "agent/forensics/summary.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;

constexpr size_t kTailLines = 10;
// After every worker is gone and strays are SIGKILLed, pipes close at once;
// this only bounds a process that escaped the job token and holds one open.
constexpr std::chrono::seconds kPipeDrainLimit{2};
// How often each worker's own peak memory is read while it runs: wait4's
// includes its reaped children's (agent/forensics/postmortem.h).
constexpr std::chrono::seconds kMemorySample{1};

// A failure of worker `w` of this attempt, as of now; `error_file` is where
// it was told to write its error.
Failure failure_of(int local_rank, int rank, pid_t pid, const std::string& error_file) {
  Failure f;
  f.local_rank = local_rank;
  f.rank = rank;
  f.pid = pid;
  f.time = std::chrono::system_clock::now();
  f.error_file = error_file;
  return f;
}

}  // namespace

WorkerGroup::WorkerGroup(asio::io_context& io, LogDir& logs, const std::string& job_token, JobCgroup* cgroup,
                         pid_t guardian, Forkserver* forkserver, Postmortem* postmortem, Listener& listener)
    : io_(io), logs_(logs), token_(job_token), cgroup_(cgroup), guardian_(guardian), postmortem_(postmortem),
      listener_(listener), base_env_(current_environment()), timer_(io), memory_timer_(io), warm_(io, forkserver),
      kills_(io, [this](pid_t pid) {
        for (auto& w : workers_)
          if (w->running && w->pid == pid) give_up_on(*w);
      }),
      paused_(io, workers_, log_, [this] { return stopping_; }) {}

WorkerGroup::~WorkerGroup() = default;

std::string WorkerGroup::attempt_token() const {
  return std::string(env::kJobToken) + "=" + token_ + ":" + std::to_string(attempt_);
}

void WorkerGroup::start(const Config& config, const rendezvous::Assignment& placement, int attempt,
                        const EnvHook& env_hook) {
  // The last attempt's rank memory cgroups go (those still busy, later).
  if (postmortem_ && !workers_.empty()) postmortem_->end_attempt(attempt_);
  c_ = config;
  placement_ = placement;
  attempt_ = attempt;
  env_hook_ = env_hook;
  log_ = spdlog::default_logger()->clone("cxxrun node" + std::to_string(placement_.group_rank));
  failures_.clear();
  kills_.clear();
  stopping_ = failing_ = escalated_ = false;
  workers_.clear();
  pipes_.clear();
  logs_.prepare_attempt(attempt_, c_.nproc_per_node);
  filtered_out_ = filtered_log(c_.duplicate_stdout_filters, "filtered_stdout.log");
  filtered_err_ = filtered_log(c_.duplicate_stderr_filters, "filtered_stderr.log");
  target_ = {};
  if (cgroup_) {
    try {
      target_ = cgroup_->begin_attempt(attempt_);
    } catch (const std::exception& e) {
      // Still contained: the subreaper and the token find what it starts.
      log_->warn("{}; this attempt's workers run without their own cgroup", e.what());
    }
  }
  warm_.begin(log_, attempt_, [this] {
    if (!stopping_) start_workers();
  });
}

std::unique_ptr<FilteredLog> WorkerGroup::filtered_log(const std::vector<std::string>& filters, const char* name) {
  if (filters.empty() || !logs_.enabled()) return nullptr;
  return std::make_unique<FilteredLog>(filters, logs_.attempt_file(attempt_, name));
}

struct WorkerGroup::Starting {
  std::unique_ptr<Worker> w;
  WorkerStdio io{};
  PendingSpawn spawn;
  const NumaPlacement* binding = nullptr;
  std::string failed;  // why nothing was forked; empty: it was
};

void WorkerGroup::start_workers() {
  const rendezvous::Assignment& p = placement_;
  log_->info("starting {} workers for entrypoint {} (attempt {}, run id {}, ranks {}..{} of {})", c_.nproc_per_node,
             c_.entrypoint_name, attempt_, c_.run_id, p.base_rank, p.base_rank + c_.nproc_per_node - 1, p.world_size);
  // Every fork first, then every exec confirmed: each worker's start (its
  // memory cgroup's move, its exec) overlaps the next forks, and the moves
  // share the kernel's grace periods instead of waiting one each in turn.
  std::vector<Starting> starting;
  starting.reserve(c_.nproc_per_node);
  if (pipe2(gate_.data(), O_CLOEXEC) != 0) gate_ = {-1, -1};  // no gate: each moves as it comes
  for (int r = 0; r < c_.nproc_per_node; ++r) {
    starting.push_back(begin_worker(r));
    if (!starting.back().failed.empty()) break;
  }
  for (int& fd : gate_) {  // every fork done: the children go
    if (fd >= 0) close(fd);
    fd = -1;
  }
  // Only the first failure is the attempt's, as when the starts went one by
  // one: those begun after it run, and the stop it brings ends them.
  bool failed = false;
  for (Starting& s : starting) failed = !finish_worker(s, !failed) || failed;
  if (failed) {
    // Reported from the loop, not inside this one: it may start the next
    // attempt.
    asio::post(io_, [this, f = failures_.front()] { listener_.on_worker_failed(f); });
    return;
  }
  sample_memory();
  warm_.started([this] {
    std::vector<pid_t> pids;
    for (const auto& w : workers_)
      if (w->running) pids.push_back(w->pid);
    return pids;
  });
}

void WorkerGroup::record_start_failure(std::unique_ptr<Worker> w, const std::string& what) {
  log_->error("{}", what);
  Failure f = failure_of(w->local_rank, w->rank, 0, "");
  f.exit_code = exit_code::not_executable;
  f.stderr_tail = {what};
  failures_.push_back(f);
  workers_.push_back(std::move(w));
}

WorkerGroup::Starting WorkerGroup::begin_worker(int local_rank) {
  const Config& c = c_;
  Starting s;
  s.w = std::make_unique<Worker>();
  Worker& w = *s.w;
  w.local_rank = local_rank;
  const rendezvous::Assignment& p = placement_;
  w.rank = p.base_rank + local_rank;
  const WorkerPlace place{local_rank,   w.rank,        p.world_size,       attempt_,
                          logs_.file(attempt_, local_rank, "error.json"), token_ + ":" + std::to_string(attempt_),
                          p.group_rank, p.group_world_size, p.master_addr, p.master_port};
  EnvMap env = worker_environment(c, place, base_env_);
  if (env_hook_) env_hook_(env, local_rank);
  s.binding = local_rank < static_cast<int>(c.numa_binding.size()) ? &c.numa_binding[local_rank] : nullptr;
  // Its own memory cgroup, where one can be made: an OOM kill is then
  // pinned on this rank (agent/forensics/postmortem.h).
  const int memory = postmortem_ ? postmortem_->rank_cgroup(attempt_, local_rank) : -1;
  try {
    s.io = open_worker_stdio(stdio_request(c, local_rank, w.rank));
    const auto argv = substitute_local_rank(c.command, local_rank);
    const auto envp = to_envp(env);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    s.spawn.pid = warm_.fork({argv, envp, cwd, s.io.out_write, s.io.err_write, target_.procs, s.binding});
    // The zygote's child is moved from here, a moment after its fork.
    if (s.spawn.pid >= 0 && memory >= 0)
      (void)!write(memory, std::to_string(s.spawn.pid).c_str(), std::to_string(s.spawn.pid).size());
    if (s.spawn.pid < 0) {
      const BindingMasks masks = s.binding ? binding_masks(*s.binding) : BindingMasks{};
      SpawnRequest request{argv, envp, -1, s.io.out_write, s.io.err_write, target_.dir >= 0 ? &target_ : nullptr,
                           -1, memory};
      request.gate = gate_[0];
      request.gate_writer = gate_[1];
      request.binding = s.binding ? &masks : nullptr;
      s.spawn = begin_spawn(request);
    }
    if (memory >= 0) close(memory);
  } catch (const std::exception& e) {
    if (memory >= 0) close(memory);
    close_all(s.io);
    s.failed = e.what();
    if (s.failed.empty()) s.failed = "cannot start a worker";
    return s;
  }
  // The child has its own: a later worker's fork must not carry these.
  close_write_ends(s.io);
  return s;
}

bool WorkerGroup::finish_worker(Starting& s, bool record) {
  if (!s.failed.empty()) {
    if (record) record_start_failure(std::move(s.w), s.failed);
    return false;
  }
  try {
    s.w->pid = finish_spawn(s.spawn);
  } catch (const std::exception& e) {
    close_all(s.io);
    if (record) record_start_failure(std::move(s.w), e.what());
    return false;
  }
  Worker& w = *s.w;
  if (postmortem_) postmortem_->started(w.local_rank, w.pid);
  if (s.binding) log_->info("{}", describe_binding(w.local_rank, *s.binding));
  w.running = true;
  workers_.push_back(std::move(s.w));
  Pipes& pipes = *(pipes_[w.local_rank] = std::make_unique<Pipes>());
  open_pipe(w, pipes.out, s.io.out_read, STDOUT_FILENO, Std::out, "stdout.log");
  open_pipe(w, pipes.err, s.io.err_read, STDERR_FILENO, Std::err, "stderr.log");
  listener_.on_worker_started(w);
  return true;
}

void WorkerGroup::open_pipe(Worker& w, WorkerPipe& p, int fd, int console, Std which, const char* file) {
  const bool redirected = has(c_.redirects.for_rank(w.local_rank), which);
  const bool teed = has(c_.tee.for_rank(w.local_rank), which);
  const bool to_console = shown_on_console(c_, w.local_rank, which);
  const std::string path = (redirected || teed) ? logs_.file(attempt_, w.local_rank, file) : "";
  auto sink = std::make_unique<StreamSink>(
      line_prefix(c_.log_line_prefix_template, {c_.role, w.local_rank, w.rank, w.pid, this_hostname()}),
      to_console ? console : -1, path, which == Std::err ? kTailLines : 0);
  FilteredLog* filtered = which == Std::out ? filtered_out_.get() : filtered_err_.get();
  if (teed && filtered) sink->duplicate_to(filtered);
  if (observer_)
    sink->observe_lines([this, local_rank = w.local_rank](std::string_view line) {
      if (observer_) observer_(local_rank, line);  // its owner may have withdrawn it (Supervisor's end)
    });
  ++open_pipes_;
  p.open(io_, fd, std::move(sink), [this](bool ended) {
    --open_pipes_;
    if (ended && stopping_) check_stopped();
  });
}

void WorkerGroup::reap(const std::function<void(pid_t)>& other) {
  // WUNTRACED/WCONTINUED: a worker stopped by a signal would otherwise hang
  // the job without a word. wait4: its peak memory comes with its status.
  // Each child is looked at first without reaping it (WNOWAIT): an ended
  // worker's /proc/<pid>/stat still says whether it had reaped children,
  // whose peaks wait4's includes.
  for (int budget = 4096; budget > 0; --budget) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
    pid_t pid = info.si_pid;
    bool children = info.si_code != CLD_STOPPED && info.si_code != CLD_CONTINUED && had_reaped_children(pid);
    int status = 0;
    rusage usage{};
    if (wait4(pid, &status, WNOHANG | WUNTRACED | WCONTINUED, &usage) <= 0) {
      // Another thread reaped it meanwhile: take whichever child is ready.
      children = false;
      if ((pid = wait4(-1, &status, WNOHANG | WUNTRACED | WCONTINUED, &usage)) <= 0) break;
    }
    const bool exited = WIFEXITED(status) || WIFSIGNALED(status);
    bool ours = false;
    if (exited && warm_.reaped(pid, status)) continue;
    for (auto& w : workers_) {
      if (!w->running || w->pid != pid) continue;
      ours = true;
      if (exited) {
        w->peak_rss = usage.ru_maxrss * 1024LL;  // kilobytes on Linux
        w->peak_rss_of_children = children;
      }
      exited ? on_exit(*w, status) : on_pause(*w, status);
    }
    if (!ours && exited) other(pid);
  }
  if (stopping_) check_stopped();
}

void WorkerGroup::on_exit(Worker& w, int status) {
  w.running = false;
  w.status = status;
  kills_.ended(w.pid);
  listener_.on_worker_exited(w);
  // Exits the agent caused while stopping for another reason are no news.
  if (stopping_ && !failing_) return;
  Failure f = failure_of(w.local_rank, w.rank, w.pid, logs_.file(attempt_, w.local_rank, "error.json"));
  set_status(f, status);
  kills_.apply(f, /*traceback=*/true);
  if (shell_exit_code(f) == 0) {
    // After a failure the group stops, even while it waits for more
    // (agent/supervisor.cc): that is no success.
    if (!stopping_ && running() == 0 && failures_.empty()) listener_.on_group_succeeded();
    return;
  }
  // What it wrote last: its traceback tells when it failed.
  if (Pipes* p = pipes_of(w); p && p->err.sink()) {
    p->err.drain_now();
    f.stderr_tail.assign(p->err.sink()->tail().begin(), p->err.sink()->tail().end());
    const TracebackCapture& tb = p->err.sink()->last_traceback();
    f.traceback = tb.text();
    if (tb.since()) f.traceback_time = *tb.since();
  }
  if (stopping_ && f.killed_by == Killer::grace) {
    // It ignored the stop signal for the whole grace: listed, since cxxrun
    // killed it, but the failure that stopped the job is not its own.
    f.stopped = true;
  } else if (stopping_ && (f.signal == SIGTERM || f.signal == SIGKILL)) {
    // Our own stop signal, unless the worker had reported an error before
    // we sent it (its error file, or its traceback on stderr): then it
    // failed on its own (say, while tearing down after its error, and a
    // peer's failure was seen first) and must be listed.
    if (failure_time(f) >= stop_started_) return;  // no report: the time we saw it
    f.stopped = true;
    f.killed_by = Killer::none;
  }
  if (postmortem_) {
    postmortem_->examine(f, status, w.peak_rss, w.peak_rss_of_children);
  } else {
    f.memory.peak_rss = w.peak_rss;
    f.memory.peak_rss_of_children = w.peak_rss_of_children;
  }
  log_->error("{}", describe(f));
  failures_.push_back(f);
  if (!stopping_) return listener_.on_worker_failed(f);
  // It may have failed before the failure that stopped the job: the other
  // nodes need it to name the root cause.
  if (f.stopped && f.killed_by != Killer::grace) listener_.on_earlier_failure(f);
}

void WorkerGroup::sample_memory() {
  if (!postmortem_) return;
  memory_timer_.expires_after(kMemorySample);
  memory_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    for (const auto& w : workers_)
      if (w->running) postmortem_->sample(w->pid);
    sample_memory();
  });
}

void WorkerGroup::on_pause(Worker& w, int status) {
  if (paused_.changed(w, status)) listener_.on_worker_paused(w);
}

bool WorkerGroup::paused() const { return paused_.any(); }

int WorkerGroup::running() const {
  int n = 0;
  for (const auto& w : workers_) n += w->running;
  return n;
}

void WorkerGroup::signal_all(int sig) {
  for (auto& w : workers_)
    if (w->running) killpg(w->pid, sig);
}

bool WorkerGroup::signal_rank(int rank, int sig) {
  for (const auto& w : workers_)
    if (w->rank == rank && w->running) {
      log_->warn("fault injection: sending {} to rank {} (pid {})", signal_name(sig), w->rank, w->pid);
      // A stop is no kill: the worker goes on after SIGCONT.
      if (sig == SIGSTOP) ::kill(w->pid, sig);
      else kill_process(w->pid, sig, Killer::fault_injection, "--inject-fault sent " + signal_name(sig));
      return true;
    }
  return false;
}

void WorkerGroup::kill_process(pid_t pid, int sig, Killer by, const std::string& why, const std::string& stack,
                               const std::vector<std::string>& no_root_cause) {
  // pid <= 0 would signal a process group, or every process.
  if (pid <= 0) return;
  kills_.note(pid, by, why, stack, no_root_cause);
  ::kill(pid, sig);
  if (sig == SIGKILL) watch_kill(pid);
}

bool WorkerGroup::hung(int local_rank) const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& w) {
    return w->local_rank == local_rank && kills_.killed_by(w->pid, Killer::hang);
  });
}

// Only workers are waited for: a stray that survives SIGKILL holds nothing
// the agent waits on once the pipes are closed (kPipeDrainLimit).
void WorkerGroup::watch_kill(pid_t pid) {
  const bool worker = std::any_of(workers_.begin(), workers_.end(),
                                  [pid](const auto& w) { return w->running && w->pid == pid; });
  if (worker) kills_.watch(pid, c_.kill_timeout);
}

// The worker outlived SIGKILL by kill_timeout: the kernel holds it
// (uninterruptible sleep) and nothing the agent does will end it. Waiting
// longer pins this node's slot; the job ends here with it named.
void WorkerGroup::give_up_on(Worker& w) {
  Failure f = failure_of(w.local_rank, w.rank, w.pid, logs_.file(attempt_, w.local_rank, "error.json"));
  f.signal = SIGKILL;
  f.unkillable = true;
  f.wait_state = wait_state(w.pid) + fmt::format("; still alive {} ms after SIGKILL (--kill-timeout)",
                                                 c_.kill_timeout.count());
  kills_.apply(f, /*traceback=*/false);
  w.running = false;
  if (Pipes* p = pipes_of(w); p && p->err.sink())
    f.stderr_tail.assign(p->err.sink()->tail().begin(), p->err.sink()->tail().end());
  log_->error("rank {} (local_rank {}, pid {}) is unkillable: {}; this node is unhealthy", w.rank, w.local_rank,
              w.pid, f.wait_state);
  failures_.push_back(f);
  listener_.on_worker_exited(w);
  if (!stopping_) return listener_.on_worker_failed(f);
  check_stopped();
}

void WorkerGroup::stop(int sig, bool failing) {
  const bool first = !stopping_;
  if (first) stop_started_ = std::chrono::system_clock::now();
  stopping_ = true;
  warm_.stop();
  failing_ = failing;
  if (first && c_.shutdown_timeout.count() == 0) {
    // --shutdown-timeout=0: no grace to give, so no SIGTERM first.
    if (int n = running(); n > 0) log_->info("stopping {} workers with SIGKILL (shutdown grace 0)", n);
    for (const auto& w : workers_)
      if (w->running) kills_.note(w->pid, Killer::grace, "the shutdown grace is 0: SIGKILL at once");
    escalate();
    return check_stopped();
  }
  if (int n = running(); n > 0)
    log_->info("stopping {} workers with {} (grace {} ms)", n, signal_name(sig), c_.shutdown_timeout.count());
  signal_all(sig);
  signal_strays(sig);
  // A stopped worker acts on the signal only once it runs again.
  for (auto& w : workers_)
    if (w->running && w->paused_since) killpg(w->pid, SIGCONT);
  if (first) {
    timer_.expires_after(c_.shutdown_timeout);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      log_->warn("workers did not stop within {} ms; sending SIGKILL", c_.shutdown_timeout.count());
      for (const auto& w : workers_)
        if (w->running)
          kills_.note(w->pid, Killer::grace,
                      fmt::format("it did not stop within the {} ms shutdown grace", c_.shutdown_timeout.count()));
      escalate();
    });
  }
  check_stopped();
}

void WorkerGroup::escalate() {
  escalated_ = true;
  signal_all(SIGKILL);
  for (const auto& w : workers_)
    if (w->running) watch_kill(w->pid);
  signal_strays(SIGKILL);
  arm_drain_limit();
}

void WorkerGroup::arm_drain_limit() {
  timer_.expires_after(kPipeDrainLimit);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    log_->warn("output pipes still open {} s after the workers were killed; closing them", kPipeDrainLimit.count());
    for (auto& [rank, p] : pipes_) p->out.close(), p->err.close();
    check_stopped();
  });
}

WorkerGroup::Pipes* WorkerGroup::pipes_of(const Worker& w) {
  const auto it = pipes_.find(w.local_rank);
  return it == pipes_.end() ? nullptr : it->second.get();
}

unsigned long long WorkerGroup::output_bytes(int local_rank) const {
  const auto it = pipes_.find(local_rank);
  if (it == pipes_.end()) return 0;
  const Pipes& p = *it->second;
  return (p.out.sink() ? p.out.sink()->bytes() : 0) + (p.err.sink() ? p.err.sink()->bytes() : 0);
}

std::vector<pid_t> WorkerGroup::attempt_pids() const {
  if (cgroup_) return cgroup_->attempt_pids();
  std::vector<pid_t> pids = find_descendants(getpid(), {guardian_, warm_.zygote_pid()});
  // A process that left the agent's tree (its parent was not reparented to
  // us) still carries the token, if it was exec'd.
  for (pid_t pid : find_processes_with_env(attempt_token()))
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  return pids;
}

int WorkerGroup::signal_strays(int sig) {
  const std::vector<pid_t> pids = attempt_pids();
  // One write kills them all, including any forked since the read.
  if (cgroup_ && sig == SIGKILL) return cgroup_->kill_attempt(), static_cast<int>(pids.size());
  int n = 0;
  for (pid_t pid : pids) n += kill(pid, sig) == 0;
  return n;
}

// The group is stopped when every worker is reaped, nothing else carrying
// this attempt's token is alive, and the pipes are drained.
void WorkerGroup::check_stopped() {
  if (!stopping_ || running() > 0) return;
  if (!strays_killed_) {
    strays_killed_ = true;
    if (int n = signal_strays(SIGKILL))
      log_->warn("killed {} leftover processes of the worker group", n);
    if (!escalated_) arm_drain_limit();
  }
  if (open_pipes_ > 0) return;
  timer_.cancel();
  paused_.cancel();
  memory_timer_.cancel();
  kills_.stop_watching();
  strays_killed_ = false;
  stopping_ = false;
  for (auto& [rank, p] : pipes_) {
    if (!p->out.sink()) continue;
    p->out.sink()->finish();
    p->err.sink()->finish();
  }
  order_by_time(failures_);
  listener_.on_group_stopped();
}

}  // namespace cxxrun::agent
