// Hang detection: a worker that stops beating (--heartbeat-timeout),
// overstays a named section (--section-timeout), or lets one of torchrun's
// file-timer scopes expire (TORCHELASTIC_ENABLE_FILE_TIMER) is killed, after
// a stack-dump signal if asked; its exit then takes the ordinary failure
// path, with the hang as its message. Checked every 100 ms, the interval of
// torchrun's file-timer server, and only when hang detection is on.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/worker_env_writer.h"

namespace cxxrun::agent {

class FileTimerServer;
class HeartbeatMonitor;
class LogDir;
class Workers;
struct Worker;

class HangWatchdog {
 public:
  // `on_hang(worker)` is told of each hung worker before it is killed.
  using OnHang = std::function<void(const Worker& w)>;
  HangWatchdog(boost::asio::io_context& io, const Config& config, const LogDir& logs, Workers& group,
               OnHang on_hang);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Adds CXXRUN_HEARTBEAT_FILE / TORCHELASTIC_TIMER_FILE for a new worker.
  void add_env(EnvMap& env, int local_rank);
  // A new attempt: forget the last one's timers. Judging runs only while
  // `judging` says the group runs.
  void new_attempt();
  void forget(pid_t pid);
  void set_judging(bool judging) { judging_ = judging; }
  // Seconds since the worker's last beat, when it has beaten.
  std::optional<double> seconds_since_beat(int local_rank) const;

 private:
  void watch_timer_fifo();
  void tick();
  void check_file_timers();
  void check_heartbeats();
  void kill_hung(const Worker& w, const std::string& what);
  void announce(const std::string& what, int rank, pid_t pid);

  boost::asio::io_context& io_;
  const Config c_;
  Workers& group_;
  OnHang on_hang_;
  std::unique_ptr<HeartbeatMonitor> heartbeats_;
  std::unique_ptr<FileTimerServer> file_timer_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> timer_fifo_;
  std::unique_ptr<boost::asio::steady_timer> tick_;
  std::vector<std::unique_ptr<boost::asio::steady_timer>> dump_timers_;
  bool judging_ = false;
};

}  // namespace cxxrun::agent
