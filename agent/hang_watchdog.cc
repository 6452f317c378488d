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
#include "agent/culprit.h"
#include "agent/process_tree.h"
#include "agent/progress_monitor.h"
#include "agent/stack_dump.h"
#include "agent/worker_group.h"
#include "common/env_names.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;

constexpr std::chrono::milliseconds kTick{100};
// Time a worker gets to print its stacks on --stack-dump-signal (its own
// handler) before the SIGKILL.
constexpr std::chrono::milliseconds kStackDumpGrace{1000};
// --hang-timeout samples every worker's CPU time and output this often: a
// /proc walk, so not every tick.
constexpr int kProgressEveryTicks = 10;

}  // namespace

HangWatchdog::HangWatchdog(asio::io_context& io, const Config& config, const LogDir& logs, Workers& group,
                           OnHang on_hang)
    : io_(io), c_(config), group_(group), on_hang_(std::move(on_hang)),
      stacks_(std::make_unique<StackDump>(io, logs)) {
  if (c_.hang_timeout.count() > 0) progress_ = std::make_unique<ProgressMonitor>(c_.hang_timeout);
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
  if (!heartbeats_ && !file_timer_ && !progress_) return;
  tick_ = std::make_unique<asio::steady_timer>(io_);
  tick();
}

HangWatchdog::~HangWatchdog() = default;

void HangWatchdog::add_env(EnvMap& env, int local_rank) {
  if (heartbeats_) env[env::kHeartbeatFile] = heartbeats_->create(local_rank);
  if (file_timer_) env[env::kTimerFile] = file_timer_->path();
  stacks_->add_env(env, attempt_, local_rank);
}

void HangWatchdog::new_attempt(int attempt) {
  attempt_ = attempt;
  collecting_ = false;
  if (file_timer_) file_timer_->clear();
  if (progress_) progress_->reset(std::chrono::steady_clock::now());
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
    if (judging_ && !collecting_) {
      check_file_timers();
      check_heartbeats();
      if (progress_ && ++ticks_ % kProgressEveryTicks == 0) check_progress();
    }
    tick();
  });
}

void HangWatchdog::check_file_timers() {
  const auto expired = file_timer_ ? file_timer_->expired() : std::vector<TimerExpiry>{};
  if (expired.empty()) return;
  // Only processes of this attempt: a stale pid may have been reused. One
  // /proc walk serves every expiry of this tick.
  const auto mine = group_.attempt_pids();
  for (const TimerExpiry& e : expired) {
    if (std::find(mine.begin(), mine.end(), e.pid) == mine.end()) continue;
    // The timer's own verdict (file_timer.h judges torch's protocol), in the
    // watchdog's one format; the scope may belong to a worker's child.
    const Worker* worker = nullptr;
    for (const auto& w : group_.workers())
      if (w->running && w->pid == e.pid) worker = w.get();
    const std::string what = fmt::format("scope '{}' of {} expired (the worker's request: {})", e.scope_id,
                                         worker ? "local rank " + std::to_string(worker->local_rank)
                                                : "a process of this attempt",
                                         signal_name(e.signal));
    if (e.signal <= 0) {
      announce(what, worker ? worker->rank : -1, e.pid);
      continue;
    }
    Verdict v;
    v.what = what;
    v.killer = Killer::file_timer;
    v.sig = e.signal;
    v.pid = e.pid;
    v.rank = worker ? worker->rank : -1;
    return judge(v);  // one hang at a time
  }
}

// The monitor judges (heartbeat_monitor.h); this only acts on its verdicts.
void HangWatchdog::check_heartbeats() {
  if (!heartbeats_) return;
  for (const HeartbeatViolation& violation : heartbeats_->check())
    for (const auto& w : group_.workers())
      if (w->local_rank == violation.local_rank && w->running && !group_.hung(w->local_rank)) {
        Verdict v;
        v.what = describe(violation);
        v.pid = w->pid;
        v.rank = w->rank;
        return judge(v);  // one hang at a time: the stacks say who stands apart
      }
}

// The progress monitor judges (progress_monitor.h); this samples for it.
void HangWatchdog::check_progress() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<pid_t> roots;
  for (const auto& w : group_.workers())
    if (w->running) roots.push_back(w->pid);
  const auto cpu = tree_cpu_time(roots);
  for (const auto& w : group_.workers()) {
    if (!w->running) {
      progress_->forget(w->local_rank);
      continue;
    }
    ProgressMonitor::Sample s;
    s.cpu = cpu.count(w->pid) ? cpu.at(w->pid) : std::chrono::nanoseconds(0);
    s.output_bytes = (w->out.sink() ? w->out.sink()->bytes() : 0) + (w->err.sink() ? w->err.sink()->bytes() : 0);
    if (heartbeats_)
      if (auto beat = heartbeats_->snapshot(w->local_rank)) s.beats = beat->beats;
    progress_->observe(w->local_rank, s, now);
  }
  const auto verdict = progress_->check(now);
  if (!verdict) return;
  Verdict v;
  v.what = fmt::format("no worker made progress (CPU time, output, heartbeats) for {:.1f} s (--hang-timeout {} s)",
                       verdict->idle.count() / 1000.0, c_.hang_timeout.count() / 1000.0);
  v.pick_culprit = true;
  judge(v);
}

// Every verdict: the stacks first, every running worker's, then the kill.
void HangWatchdog::judge(const Verdict& v) {
  collecting_ = true;
  announce(v.what, v.rank, v.pid);
  std::vector<StackDump::Target> targets;
  for (const auto& w : group_.workers())
    if (w->running) targets.push_back({w->rank, w->local_rank, w->pid});
  // The user's own dump signal, as before: their handler prints where they want.
  if (c_.stack_dump_signal != 0 && v.pid > 0) kill(v.pid, c_.stack_dump_signal);
  const auto started = std::chrono::steady_clock::now();
  stacks_->collect(attempt_, targets, [this, v, started](std::map<int, std::string> stacks, const std::string& bundle) {
    const auto waited = std::chrono::steady_clock::now() - started;
    if (c_.stack_dump_signal == 0 || waited >= kStackDumpGrace) return act(v, stacks, bundle);
    grace_ = std::make_unique<asio::steady_timer>(io_, kStackDumpGrace - waited);
    grace_->async_wait([this, v, stacks = std::move(stacks), bundle](const boost::system::error_code& ec) {
      if (!ec) act(v, stacks, bundle);
    });
  });
}

void HangWatchdog::act(const Verdict& v, const std::map<int, std::string>& stacks, const std::string& bundle) {
  collecting_ = false;
  const HangPicture p = picture(stacks);
  Report r;
  r.what = v.what;
  r.picture = p.line;
  r.bundle = bundle;
  pid_t pid = v.pid;
  r.rank = v.rank;
  if (v.pick_culprit) {
    r.rank = p.culprit.value_or(-1);
    pid = 0;
    for (const auto& w : group_.workers())
      if (w->running && (w->rank == r.rank || (r.rank < 0 && pid == 0))) {
        pid = w->pid;
        r.rank = w->rank;
      }
  }
  if (stacks.count(r.rank)) r.stack = stacks.at(r.rank);
  if (!p.line.empty())
    group_.log()->error("hang: {}{}", p.line, bundle.empty() ? "" : " (every rank's stack in " + bundle + ")");
  const Worker* target = nullptr;
  for (const auto& w : group_.workers())
    if (w->running && w->pid == pid) target = w.get();
  if (target) on_hang_(*target, r);
  // Still there: the group may have stopped while the stacks were taken.
  if (pid <= 0 || (!target && kill(pid, 0) != 0)) return;
  std::string why = v.what;
  if (v.pick_culprit) why += "; rank " + std::to_string(r.rank) + " stands apart";
  if (!p.line.empty()) why += "; " + p.line;
  group_.kill_process(pid, v.sig, v.killer, why, r.stack);
}

// One line per verdict, whichever judge gave it.
void HangWatchdog::announce(const std::string& what, int rank, pid_t pid) {
  if (rank >= 0) group_.log()->error("worker hung: {} (rank {}, pid {})", what, rank, pid);
  else if (pid > 0) group_.log()->error("worker hung: {} (pid {})", what, pid);
  else group_.log()->error("job hung: {}", what);
}

}  // namespace cxxrun::agent
