#include "agent/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <spdlog/spdlog.h>

#include "agent/failure.h"
#include "agent/guardian.h"
#include "agent/log_dir.h"
#include "agent/meeting.h"
#include "agent/output.h"
#include "agent/process_tree.h"
#include "agent/spawn.h"
#include "agent/worker_env.h"

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

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

struct Pipe {
  std::unique_ptr<asio::posix::stream_descriptor> fd;
  std::unique_ptr<StreamSink> sink;
  std::array<char, 16384> buf;
};

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Pipe out, err;
};

enum class Phase { running, stopping, done };
enum class Reason { success, failure, signal };

class Supervisor {
 public:
  Supervisor(const Config& c, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& token)
      : c_(c), logs_(logs), guardian_(guardian), meeting_(meeting), token_(token), signals_(io_), timer_(io_),
        keep_alive_timer_(io_),
        base_env_(current_environment()), host_(hostname()),
        log_(spdlog::default_logger()->clone("cxxrun node" + std::to_string(c.group_rank))) {}

  int run() {
    signals_.add(SIGCHLD);
    for (int sig : c_.signals_to_handle) signals_.add(sig);
    wait_signal();
    schedule_keep_alive();
    start_group();
    io_.run();
    return exit_code_;
  }

 private:
  std::string attempt_token() const { return "CXXRUN_JOB_TOKEN=" + token_ + ":" + std::to_string(attempt_); }
  int world_size() const { return c_.world_size > 0 ? c_.world_size : c_.nproc_per_node * c_.group_world_size; }

  void start_group() {
    phase_ = Phase::running;
    failures_.clear();
    escalated_ = false;
    workers_.clear();
    logs_.prepare_attempt(attempt_, c_.nproc_per_node);
    log_->info("starting {} workers for entrypoint {} (attempt {}, run id {})", c_.nproc_per_node,
               c_.entrypoint_name, attempt_, c_.run_id);
    for (int r = 0; r < c_.nproc_per_node; ++r) {
      if (!start_worker(r)) {
        // Stop from the event loop, not from inside this loop: stopping may
        // start the next attempt.
        asio::post(io_, [this] { begin_stop(Reason::failure, SIGTERM); });
        break;
      }
    }
  }

  bool start_worker(int local_rank) {
    auto w = std::make_unique<Worker>();
    w->local_rank = local_rank;
    w->rank = c_.base_rank + local_rank;
    WorkerPlace place{local_rank, w->rank, world_size(), attempt_, logs_.file(attempt_, local_rank, "error.json"),
                      token_ + ":" + std::to_string(attempt_)};
    auto env = to_envp(worker_environment(c_, place, base_env_));
    Spawned s;
    try {
      s = spawn_worker(substitute_local_rank(c_.command, local_rank), env);
    } catch (const std::exception& e) {
      Failure f{local_rank, w->rank, 0, 127, 0, std::chrono::system_clock::now(), "", {e.what()}};
      log_->error("{}", e.what());
      failures_.push_back(f);
      workers_.push_back(std::move(w));
      return false;
    }
    w->pid = s.pid;
    w->running = true;
    Worker& ref = *w;
    workers_.push_back(std::move(w));
    open_pipe(ref, ref.out, s.stdout_fd, STDOUT_FILENO, Std::out, "stdout.log");
    open_pipe(ref, ref.err, s.stderr_fd, STDERR_FILENO, Std::err, "stderr.log");
    return true;
  }

  void open_pipe(Worker& w, Pipe& p, int fd, int console, Std which, const char* file) {
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

  void read_pipe(Pipe& p) {
    p.fd->async_read_some(asio::buffer(p.buf), [this, &p](const boost::system::error_code& ec, size_t n) {
      if (n > 0) p.sink->write(std::string_view(p.buf.data(), n));
      if (!ec) return read_pipe(p);
      if (ec == asio::error::operation_aborted) return;
      close_pipe(p);
      if (phase_ == Phase::stopping) check_stopped();
    });
  }

  void close_pipe(Pipe& p) {
    if (!p.fd || !p.fd->is_open()) return;
    boost::system::error_code ignored;
    p.fd->close(ignored);
    --open_pipes_;
  }

  void schedule_keep_alive() {
    if (meeting_.keep_alive_interval().count() == 0) return;
    keep_alive_timer_.expires_after(meeting_.keep_alive_interval());
    keep_alive_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || phase_ == Phase::done) return;
      meeting_.keep_alive();
      schedule_keep_alive();
    });
  }

  void wait_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGCHLD)
        reap();
      else
        on_agent_signal(sig);
      if (phase_ != Phase::done) wait_signal();
    });
  }

  void reap() {
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

  void on_worker_exit(Worker& w, int status) {
    w.running = false;
    if (phase_ != Phase::running) return;
    Failure f{w.local_rank, w.rank, w.pid, 0, 0, std::chrono::system_clock::now(),
              logs_.file(attempt_, w.local_rank, "error.json"), {}};
    set_status(f, status);
    if (shell_exit_code(f) == 0) {
      for (auto& other : workers_)
        if (other->running) return;
      log_->info("all {} workers succeeded", workers_.size());
      return begin_stop(Reason::success, SIGTERM);
    }
    log_->error("{}", describe(f));
    failures_.push_back(f);
    begin_stop(Reason::failure, SIGTERM);
  }

  void on_agent_signal(int sig) {
    if (!ends_job(sig)) {
      log_->info("forwarding {} to {} workers", signal_name(sig), count_running());
      signal_workers(sig);
      return;
    }
    if (phase_ == Phase::stopping && reason_ == Reason::signal) {
      log_->warn("received {} again; killing workers now", signal_name(sig));
      return escalate();
    }
    log_->warn("received {}; forwarding it to workers and shutting down", signal_name(sig));
    agent_signal_ = sig;
    begin_stop(Reason::signal, sig);
  }

  int count_running() const {
    int n = 0;
    for (const auto& w : workers_) n += w->running;
    return n;
  }

  void signal_workers(int sig) {
    for (auto& w : workers_)
      if (w->running) killpg(w->pid, sig);
  }

  void begin_stop(Reason reason, int sig) {
    const bool first = phase_ == Phase::running;
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

  void escalate() {
    escalated_ = true;
    signal_workers(SIGKILL);
    signal_processes_with_env(attempt_token(), SIGKILL);
    arm_drain_limit();
  }

  void arm_drain_limit() {
    timer_.expires_after(kPipeDrainLimit);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      log_->warn("output pipes still open {} s after the workers were killed; closing them",
                 kPipeDrainLimit.count());
      for (auto& w : workers_) close_pipe(w->out), close_pipe(w->err);
      check_stopped();
    });
  }

  // The group is stopped when every worker is reaped, nothing else carrying
  // this attempt's token is alive, and the pipes are drained.
  void check_stopped() {
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
    finish_attempt();
  }

  void finish_attempt() {
    for (auto& w : workers_) {
      if (!w->out.sink) continue;  // its exec failed
      w->out.sink->finish();
      w->err.sink->finish();
      for (auto& f : failures_)
        if (f.local_rank == w->local_rank && f.pid == w->pid)
          f.stderr_tail.assign(w->err.sink->tail().begin(), w->err.sink->tail().end());
    }
    if (reason_ == Reason::failure && agent_signal_ == 0 && attempt_ < c_.max_restarts) {
      ++attempt_;
      log_->warn("worker group failed ({}); restarting, attempt {} of {} restarts", describe(failures_[0]),
                 attempt_, c_.max_restarts);
      return start_group();
    }
    finish(reason_ == Reason::signal     ? 128 + agent_signal_
           : reason_ == Reason::failure ? shell_exit_code(failures_[0])
                                        : 0);
  }

  void finish(int code) {
    if (reason_ == Reason::failure) {
      const std::string summary = format_summary(c_.entrypoint_name, host_, failures_);
      (void)!write(STDERR_FILENO, summary.data(), summary.size());
    }
    log_->info("exiting with code {}", code);
    exit_code_ = code;
    phase_ = Phase::done;
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    timer_.cancel();
    keep_alive_timer_.cancel();
    io_.stop();
  }

  const Config& c_;
  LogDir& logs_;
  Guardian& guardian_;
  Meeting& meeting_;
  const std::string token_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  asio::steady_timer keep_alive_timer_;
  const EnvMap base_env_;
  const std::string host_;
  std::shared_ptr<spdlog::logger> log_;

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Failure> failures_;
  int attempt_ = 0;
  int open_pipes_ = 0;
  Phase phase_ = Phase::running;
  Reason reason_ = Reason::success;
  bool escalated_ = false;
  bool strays_killed_ = false;
  int agent_signal_ = 0;
  int exit_code_ = 1;
};

}  // namespace

int supervise(const Config& config, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& job_token) {
  Supervisor s(config, logs, guardian, meeting, job_token);
  return s.run();
}

}  // namespace cxxrun::agent
