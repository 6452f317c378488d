#include "agent/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "agent/file_timer.h"
#include "agent/guardian.h"
#include "agent/heartbeat_monitor.h"
#include "agent/health_server.h"
#include "agent/log_dir.h"
#include "agent/meeting.h"
#include "agent/process_tree.h"
#include "agent/spawn.h"
#include "agent/supervisor_impl.h"

namespace cxxrun::agent {
namespace {

constexpr size_t kTailLines = 10;
// After every worker is gone and strays are SIGKILLed, pipes close at once;
// this only bounds a process that escaped the job token and holds one open.
constexpr std::chrono::seconds kPipeDrainLimit{2};

bool ends_job(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT; }

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

Supervisor::Supervisor(const Config& c, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& token)
    : c_(c), logs_(logs), guardian_(guardian), meeting_(meeting), token_(token), signals_(io_), timer_(io_),
      keep_alive_timer_(io_), base_env_(current_environment()), host_(hostname()),
      log_(spdlog::default_logger()->clone("cxxrun node" + std::to_string(c.group_rank))), events_(c.event_log) {}

Supervisor::~Supervisor() {
  if (rendezvous_thread_.joinable()) rendezvous_thread_.join();
}

int Supervisor::run() {
  signals_.add(SIGCHLD);
  for (int sig : c_.signals_to_handle) signals_.add(sig);
  wait_signal();
  schedule_keep_alive();
  start_watching();
  start_health_server();
  start_watchdog();
  record_rendezvous();
  start_group();
  io_.run();
  return exit_code_;
}

std::string Supervisor::attempt_token() const {
  return "CXXRUN_JOB_TOKEN=" + token_ + ":" + std::to_string(attempt_);
}

int Supervisor::world_size() const {
  return c_.world_size > 0 ? c_.world_size : c_.nproc_per_node * c_.group_world_size;
}

void Supervisor::start_group() {
  phase_ = Phase::running;
  failures_.clear();
  hung_.clear();
  if (file_timer_) file_timer_->clear();
  escalated_ = false;
  workers_.clear();
  logs_.prepare_attempt(attempt_, c_.nproc_per_node);
  schedule_faults();
  log_->info("starting {} workers for entrypoint {} (attempt {}, run id {}, ranks {}..{} of {})", c_.nproc_per_node,
             c_.entrypoint_name, attempt_, c_.run_id, c_.base_rank, c_.base_rank + c_.nproc_per_node - 1,
             world_size());
  for (int r = 0; r < c_.nproc_per_node; ++r) {
    if (!start_worker(r)) {
      // Handle it from the event loop, not inside this loop: it may start
      // the next attempt.
      asio::post(io_, [this] { on_failure(failures_.back()); });
      break;
    }
  }
}

bool Supervisor::start_worker(int local_rank) {
  auto w = std::make_unique<Worker>();
  w->local_rank = local_rank;
  w->rank = c_.base_rank + local_rank;
  WorkerPlace place{local_rank, w->rank, world_size(), attempt_, logs_.file(attempt_, local_rank, "error.json"),
                    token_ + ":" + std::to_string(attempt_)};
  EnvMap env_map = worker_environment(c_, place, base_env_);
  add_watchdog_env(env_map, local_rank);
  auto env = to_envp(env_map);
  Spawned s;
  try {
    s = spawn_worker(substitute_local_rank(c_.command, local_rank), env);
  } catch (const std::exception& e) {
    log_->error("{}", e.what());
    failures_.push_back(Failure{local_rank, w->rank, 0, 127, 0, std::chrono::system_clock::now(), "", {e.what()}, "", ""});
    workers_.push_back(std::move(w));
    return false;
  }
  w->pid = s.pid;
  w->running = true;
  Worker& ref = *w;
  workers_.push_back(std::move(w));
  open_pipe(ref, ref.out, s.stdout_fd, STDOUT_FILENO, Std::out, "stdout.log");
  open_pipe(ref, ref.err, s.stderr_fd, STDERR_FILENO, Std::err, "stderr.log");
  record_start(ref);
  return true;
}

void Supervisor::open_pipe(Worker& w, Pipe& p, int fd, int console, Std which, const char* file) {
  const bool redirected = has(c_.redirects.for_rank(w.local_rank), which);
  const bool teed = has(c_.tee.for_rank(w.local_rank), which);
  const bool filtered = !c_.local_ranks_filter.empty() && !c_.local_ranks_filter.count(w.local_rank);
  const bool to_console = !filtered && (teed || !redirected);
  const std::string path = (redirected || teed) ? logs_.file(attempt_, w.local_rank, file) : "";
  p.sink = std::make_unique<StreamSink>(line_prefix(c_.log_line_prefix_template, c_.role, w.local_rank, w.rank),
                                        to_console ? console : -1, path, which == Std::err ? kTailLines : 0);
  p.fd = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  ++open_pipes_;
  read_pipe(p);
}

void Supervisor::read_pipe(Pipe& p) {
  p.fd->async_read_some(asio::buffer(p.buf), [this, &p](const boost::system::error_code& ec, size_t n) {
    if (n > 0) p.sink->write(std::string_view(p.buf.data(), n));
    if (!ec) return read_pipe(p);
    if (ec == asio::error::operation_aborted) return;
    close_pipe(p);
    if (phase_ == Phase::stopping) check_stopped();
  });
}

// Reads what a worker that just exited left in its pipe, so a failure record
// sent to other nodes right away carries its last stderr lines.
void Supervisor::drain_now(Pipe& p) {
  if (!p.fd || !p.fd->is_open()) return;
  ssize_t n;
  while ((n = ::read(p.fd->native_handle(), p.buf.data(), p.buf.size())) > 0)
    p.sink->write(std::string_view(p.buf.data(), n));
}

void Supervisor::close_pipe(Pipe& p) {
  if (!p.fd || !p.fd->is_open()) return;
  boost::system::error_code ignored;
  p.fd->close(ignored);
  --open_pipes_;
}

void Supervisor::wait_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGCHLD)
      reap();
    else
      on_agent_signal(sig);
    if (phase_ != Phase::done) wait_signal();
  });
}

void Supervisor::reap() {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == guardian_.pid()) {
      guardian_.mark_reaped();
      log_->warn("the guardian process exited; workers are no longer protected against the agent's death");
      continue;
    }
    for (auto& w : workers_)
      if (w->running && w->pid == pid) on_worker_exit(*w, status);
  }
  if (phase_ == Phase::stopping) check_stopped();
}

void Supervisor::on_worker_exit(Worker& w, int status) {
  w.running = false;
  w.status = status;
  if (file_timer_) file_timer_->forget(w.pid);
  // While the group stops after a failure, here or on another node, exits
  // the agent did not cause still count: a crash's victims may be reaped
  // before the crash itself.
  const bool failing = phase_ == Phase::stopping && (reason_ == Reason::failure || reason_ == Reason::remote);
  if (phase_ != Phase::running && !failing) return;
  Failure f{w.local_rank, w.rank, w.pid, 0, 0, std::chrono::system_clock::now(),
            logs_.file(attempt_, w.local_rank, "error.json"), {}, "", ""};
  set_status(f, status);
  if (auto hang = hung_.find(w.local_rank); hang != hung_.end()) f.message = hang->second;
  if (shell_exit_code(f) == 0) {
    if (!failing && count_running() == 0) on_success();
    return;
  }
  if (failing && (f.signal == SIGTERM || f.signal == SIGKILL)) {
    // Our own stop signal, unless the worker had reported an error before
    // we sent it: then it failed on its own (say, while tearing down after
    // its error, and a peer's failure was seen first) and must be listed.
    if (failure_time(f) >= stop_started_) return;  // no error file: the time we saw it
    f.stopped = true;
  }
  drain_now(w.err);
  f.stderr_tail.assign(w.err.sink->tail().begin(), w.err.sink->tail().end());
  log_->error("{}", describe(f));
  failures_.push_back(f);
  if (!failing) return on_failure(f);
  // It may have failed before the failure that stopped the job: the other
  // nodes need it to name the root cause.
  if (f.stopped) publish(f);
}

void Supervisor::on_agent_signal(int sig) {
  if (!ends_job(sig)) {
    log_->info("forwarding {} to {} workers", signal_name(sig), count_running());
    signal_workers(sig);
    return;
  }
  if (phase_ == Phase::rendezvous) {
    // A thread is blocked in the rendezvous and no worker runs: leave now;
    // the guardian cleans up after us.
    log_->warn("received {} during the rendezvous; exiting", signal_name(sig));
    spdlog::default_logger()->flush();
    std::_Exit(128 + sig);
  }
  if (phase_ == Phase::stopping && reason_ == Reason::signal) {
    log_->warn("received {} again; killing workers now", signal_name(sig));
    return escalate();
  }
  log_->warn("received {}; forwarding it to workers and shutting down", signal_name(sig));
  agent_signal_ = sig;
  if (phase_ == Phase::barrier) return finish(128 + sig);
  begin_stop(Reason::signal, sig);
}

int Supervisor::count_running() const {
  int n = 0;
  for (const auto& w : workers_) n += w->running;
  return n;
}

void Supervisor::signal_workers(int sig) {
  for (auto& w : workers_)
    if (w->running) killpg(w->pid, sig);
}

void Supervisor::begin_stop(Reason reason, int sig) {
  const bool first = phase_ == Phase::running;
  if (first) stop_started_ = std::chrono::system_clock::now();
  phase_ = Phase::stopping;
  reason_ = reason;
  if (int n = count_running(); n > 0)
    log_->info("stopping {} workers with {} (grace {} ms)", n, signal_name(sig), c_.shutdown_timeout.count());
  signal_workers(sig);
  signal_processes_with_env(attempt_token(), sig);
  if (first) {
    timer_.expires_after(c_.shutdown_timeout);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      log_->warn("workers did not stop within {} ms; sending SIGKILL", c_.shutdown_timeout.count());
      escalate();
    });
  }
  check_stopped();
}

void Supervisor::escalate() {
  escalated_ = true;
  signal_workers(SIGKILL);
  signal_processes_with_env(attempt_token(), SIGKILL);
  arm_drain_limit();
}

void Supervisor::arm_drain_limit() {
  timer_.expires_after(kPipeDrainLimit);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    log_->warn("output pipes still open {} s after the workers were killed; closing them", kPipeDrainLimit.count());
    for (auto& w : workers_) close_pipe(w->out), close_pipe(w->err);
    check_stopped();
  });
}

// The group is stopped when every worker is reaped, nothing else carrying
// this attempt's token is alive, and the pipes are drained.
void Supervisor::check_stopped() {
  if (phase_ != Phase::stopping || count_running() > 0) return;
  if (!strays_killed_) {
    strays_killed_ = true;
    if (int n = signal_processes_with_env(attempt_token(), SIGKILL))
      log_->warn("killed {} leftover processes of the worker group", n);
    if (!escalated_) arm_drain_limit();
  }
  if (open_pipes_ > 0) return;
  timer_.cancel();
  strays_killed_ = false;
  for (auto& w : workers_) {
    if (!w->out.sink) continue;  // its exec failed
    w->out.sink->finish();
    w->err.sink->finish();
  }
  order_by_time(failures_);
  record_attempt_end();
  finish_attempt();
}

void Supervisor::finish(int code) {
  log_->info("exiting with code {}", code);
  EventDetails details;
  if (code != 0) details.raw_error = "exit code " + std::to_string(code);
  events_.agent_event(code == 0 ? AgentEvent::succeeded : AgentEvent::failed, details);
  exit_code_ = code;
  phase_ = Phase::done;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  timer_.cancel();
  keep_alive_timer_.cancel();
  io_.stop();
}

int supervise(const Config& config, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& job_token) {
  Supervisor s(config, logs, guardian, meeting, job_token);
  return s.run();
}

}  // namespace cxxrun::agent
