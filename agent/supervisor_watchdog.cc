// Hang detection: a worker that stops beating, overstays a named section, or
// lets a torchrun file-timer scope expire is treated like a worker that
// failed: it is killed (after a stack-dump signal if asked) and the normal
// failure path restarts the group. Checked every 100 ms, the interval of
// torchrun's file-timer server, and only when hang detection is on.
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <spdlog/spdlog.h>

#include "agent/file_timer.h"
#include "agent/heartbeat_monitor.h"
#include "agent/log_dir.h"
#include "agent/process_tree.h"
#include "agent/supervisor_impl.h"

namespace cxxrun::agent {
namespace {

constexpr std::chrono::milliseconds kWatchdogTick{100};
// Time a worker gets to print its stacks before the SIGKILL.
constexpr std::chrono::milliseconds kStackDumpGrace{1000};

}  // namespace

void Supervisor::start_watchdog() {
  if (c_.heartbeat_timeout.count() > 0 || !c_.section_timeouts.empty()) {
    // Under the run's log dir when there is one, so the guardian's cleanup
    // after an agent SIGKILL covers the pages too.
    std::string dir;
    if (logs_.enabled()) {
      dir = logs_.run_dir() + "/heartbeat";
      std::filesystem::create_directories(dir);
    }
    heartbeats_ = std::make_unique<HeartbeatMonitor>(c_.heartbeat_timeout, dir);
  }
  std::map<std::string, std::string> env(base_env_.begin(), base_env_.end());
  if (c_.file_timer) {
    env["TORCHELASTIC_ENABLE_FILE_TIMER"] = "1";
    if (!c_.file_timer_path.empty()) env["TORCHELASTIC_TIMER_FILE"] = c_.file_timer_path;
  }
  file_timer_ = FileTimerServer::from_environment(env);
  if (file_timer_) {
    // dup: the descriptor object closes what it owns; the server keeps its own.
    timer_fifo_ = std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(file_timer_->fd()));
    watch_timer_fifo();
  }
  if (!heartbeats_ && !file_timer_) return;
  watchdog_ = std::make_unique<asio::steady_timer>(io_);
  watchdog_tick();
}

void Supervisor::add_watchdog_env(EnvMap& env, int local_rank) {
  if (heartbeats_) env["CXXRUN_HEARTBEAT_FILE"] = heartbeats_->create(local_rank);
  if (file_timer_) env["TORCHELASTIC_TIMER_FILE"] = file_timer_->path();
}

void Supervisor::watch_timer_fifo() {
  timer_fifo_->async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    if (ec) return;
    file_timer_->on_readable();
    watch_timer_fifo();
  });
}

void Supervisor::watchdog_tick() {
  watchdog_->expires_after(kWatchdogTick);
  watchdog_->async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ == Phase::done) return;
    if (phase_ == Phase::running) {
      const auto expired = file_timer_ ? file_timer_->expired() : std::vector<TimerExpiry>{};
      // Only processes of this attempt: a stale pid may have been reused. One
      // /proc walk serves every expiry of this tick.
      const auto mine = expired.empty() ? std::vector<pid_t>{} : find_processes_with_env(attempt_token());
      for (const TimerExpiry& e : expired) {
        if (std::find(mine.begin(), mine.end(), e.pid) == mine.end()) continue;
        log_->error("file-timer scope '{}' of pid {} expired; sending {}", e.scope_id, e.pid, signal_name(e.signal));
        if (e.signal > 0) kill(e.pid, e.signal);
      }
      if (heartbeats_) {
        for (const HeartbeatViolation& v : heartbeats_->check())
          for (auto& w : workers_)
            if (w->local_rank == v.local_rank && w->running) on_hang(*w, describe(v));
        for (auto& w : workers_) {
          if (!w->running || hung_.count(w->local_rank)) continue;
          auto snap = heartbeats_->snapshot(w->local_rank);
          for (const OpenSection& sec : snap ? snap->sections : std::vector<OpenSection>{}) {
            auto limit = c_.section_timeouts.find(sec.name);
            if (limit != c_.section_timeouts.end() && sec.open_for > limit->second)
              on_hang(*w, "local rank " + std::to_string(w->local_rank) + ": section '" + sec.name + "' open for " +
                              std::to_string(sec.open_for.count() / 1000000) + " ms (--section-timeout " +
                              std::to_string(limit->second.count()) + " ms)");
          }
        }
      }
    }
    watchdog_tick();
  });
}

// Kills a hung worker; its exit then takes the ordinary failure path, with
// `what` as the message of its failure report.
void Supervisor::on_hang(Worker& w, const std::string& what) {
  if (hung_.count(w.local_rank)) return;
  hung_[w.local_rank] = what;
  log_->error("worker hung: {} (rank {}, pid {})", what, w.rank, w.pid);
  events_.worker_status(WorkerStatus::unhealthy, WorkerRef{w.local_rank, w.rank, w.pid});
  if (c_.stack_dump_signal == 0) {
    kill(w.pid, SIGKILL);
    return;
  }
  kill(w.pid, c_.stack_dump_signal);
  auto timer = std::make_unique<asio::steady_timer>(io_, kStackDumpGrace);
  timer->async_wait([this, pid = w.pid, &w](const boost::system::error_code& ec) {
    if (!ec && w.running && w.pid == pid) kill(pid, SIGKILL);
  });
  fault_timers_.push_back(std::move(timer));
}

}  // namespace cxxrun::agent
