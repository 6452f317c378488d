#include "agent/hang_watchdog.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/failure.h"
#include "agent/file_timer.h"
#include "agent/heartbeat_monitor.h"
#include "agent/log_dir.h"
#include "agent/process_tree.h"
#include "agent/worker_group.h"
#include "common/env_names.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;

constexpr std::chrono::milliseconds kTick{100};
// Time a worker gets to print its stacks before the SIGKILL.
constexpr std::chrono::milliseconds kStackDumpGrace{1000};

}  // namespace

HangWatchdog::HangWatchdog(asio::io_context& io, const Config& config, const LogDir& logs, Workers& group,
                           OnHang on_hang)
    : io_(io), c_(config), group_(group), on_hang_(std::move(on_hang)) {
  if (c_.heartbeat_timeout.count() > 0 || !c_.section_timeouts.empty()) {
    // Under the run's log dir when there is one, so the guardian's cleanup
    // after an agent SIGKILL covers the pages too.
    std::string dir;
    if (logs.enabled()) {
      dir = logs.run_dir() + "/heartbeat";
      std::filesystem::create_directories(dir);
    }
    std::map<std::string, std::chrono::nanoseconds> section_limits;
    for (const auto& [name, limit] : c_.section_timeouts) section_limits[name] = limit;
    heartbeats_ = std::make_unique<HeartbeatMonitor>(c_.heartbeat_timeout, dir, std::move(section_limits));
  }
  EnvMap env = current_environment();
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
  tick_ = std::make_unique<asio::steady_timer>(io_);
  tick();
}

HangWatchdog::~HangWatchdog() = default;

void HangWatchdog::add_env(EnvMap& env, int local_rank) {
  if (heartbeats_) env[env::kHeartbeatFile] = heartbeats_->create(local_rank);
  if (file_timer_) env[env::kTimerFile] = file_timer_->path();
}

void HangWatchdog::new_attempt() {
  if (file_timer_) file_timer_->clear();
}

void HangWatchdog::forget(pid_t pid) {
  if (file_timer_) file_timer_->forget(pid);
}

std::optional<double> HangWatchdog::seconds_since_beat(int local_rank) const {
  if (!heartbeats_) return std::nullopt;
  auto beat = heartbeats_->snapshot(local_rank);
  if (!beat || !beat->since_last_beat) return std::nullopt;
  return std::chrono::duration<double>(*beat->since_last_beat).count();
}

void HangWatchdog::watch_timer_fifo() {
  timer_fifo_->async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    if (ec) return;
    file_timer_->on_readable();
    watch_timer_fifo();
  });
}

void HangWatchdog::tick() {
  tick_->expires_after(kTick);
  tick_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (judging_) {
      check_file_timers();
      check_heartbeats();
    }
    tick();
  });
}

void HangWatchdog::check_file_timers() {
  const auto expired = file_timer_ ? file_timer_->expired() : std::vector<TimerExpiry>{};
  if (expired.empty()) return;
  // Only processes of this attempt: a stale pid may have been reused. One
  // /proc walk serves every expiry of this tick.
  const auto mine = find_processes_with_env(group_.attempt_token());
  for (const TimerExpiry& e : expired) {
    if (std::find(mine.begin(), mine.end(), e.pid) == mine.end()) continue;
    // The timer's own verdict (file_timer.h judges torch's protocol), in the
    // watchdog's one format; the scope may belong to a worker's child.
    const Worker* worker = nullptr;
    for (const auto& w : group_.workers())
      if (w->running && w->pid == e.pid) worker = w.get();
    const std::string what = fmt::format("{}: file-timer scope '{}' expired; sending {}",
                                         worker ? "local rank " + std::to_string(worker->local_rank)
                                                : "a process of this attempt",
                                         e.scope_id, signal_name(e.signal));
    announce(what, worker ? worker->rank : -1, e.pid);
    if (e.signal > 0)
      group_.kill_process(e.pid, e.signal, Killer::file_timer,
                          fmt::format("scope '{}' expired (the worker's request: {})", e.scope_id,
                                      signal_name(e.signal)));
  }
}

// The monitor judges (heartbeat_monitor.h); this only acts on its verdicts.
void HangWatchdog::check_heartbeats() {
  if (!heartbeats_) return;
  for (const HeartbeatViolation& v : heartbeats_->check())
    for (const auto& w : group_.workers())
      if (w->local_rank == v.local_rank && w->running) kill_hung(*w, describe(v));
}

// One line per verdict, whichever judge gave it.
void HangWatchdog::announce(const std::string& what, int rank, pid_t pid) {
  if (rank >= 0) group_.log()->error("worker hung: {} (rank {}, pid {})", what, rank, pid);
  else group_.log()->error("worker hung: {} (pid {})", what, pid);
}

// Its exit then takes the ordinary failure path, with `what` as the message
// of its failure report.
void HangWatchdog::kill_hung(const Worker& w, const std::string& what) {
  if (group_.hung(w.local_rank)) return;
  announce(what, w.rank, w.pid);
  on_hang_(w);
  if (c_.stack_dump_signal == 0) return group_.kill_process(w.pid, SIGKILL, Killer::hang, what);
  group_.kill_process(w.pid, c_.stack_dump_signal, Killer::hang, what);
  auto timer = std::make_unique<asio::steady_timer>(io_, kStackDumpGrace);
  // By pid, not by reference: the group may have restarted since.
  timer->async_wait([this, pid = w.pid](const boost::system::error_code& ec) {
    if (ec) return;
    for (const auto& worker : group_.workers())
      if (worker->running && worker->pid == pid) group_.kill_process(pid, SIGKILL, Killer::hang, "");
  });
  dump_timers_.push_back(std::move(timer));
}

}  // namespace cxxrun::agent
