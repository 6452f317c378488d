// The supervisor's class, shared by its two halves: supervisor.cc runs the
// local worker group (spawn, output, reaping, stopping process trees) and
// supervisor_elastic.cc decides what happens after a group stops (restart
// here, restart every node through a new rendezvous round, wait for the
// others, or exit). Internal to agent/: it pulls in Asio.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <spdlog/logger.h>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/event_log.h"
#include "agent/event_watcher.h"
#include "agent/failure.h"
#include "agent/health_snapshot.h"
#include "agent/output.h"
#include "agent/worker_env.h"

namespace cxxrun::agent {

class FileTimerServer;
class Guardian;
class HealthServer;
class HeartbeatMonitor;
class LogDir;
class Meeting;

namespace asio = boost::asio;

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
  int status = 0;  // waitpid status once it exited
  Pipe out, err;
};

// running: workers up. stopping: taking the group down. rendezvous: a
// thread re-forms the job. barrier: our workers succeeded, others' not yet.
enum class Phase { running, stopping, rendezvous, barrier, done };
// Why the group is stopping. remote: a worker failed on another node.
// membership: a node joined or died; the restart does not use the budget.
// lost: too few nodes are left to go on.
enum class Reason { success, failure, remote, membership, lost, signal };

class Supervisor {
 public:
  Supervisor(const Config& c, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& token);
  ~Supervisor();
  int run();

 private:
  // supervisor.cc: the local group.
  std::string attempt_token() const;
  int world_size() const;
  void start_group();
  bool start_worker(int local_rank);
  void open_pipe(Worker& w, Pipe& p, int fd, int console, Std which, const char* file);
  void read_pipe(Pipe& p);
  void drain_now(Pipe& p);
  void close_pipe(Pipe& p);
  void wait_signal();
  void reap();
  void on_worker_exit(Worker& w, int status);
  void on_agent_signal(int sig);
  int count_running() const;
  void signal_workers(int sig);
  void begin_stop(Reason reason, int sig);
  void escalate();
  void arm_drain_limit();
  void check_stopped();
  void finish(int code);

  // supervisor_elastic.cc: what happens between attempts.
  void start_watching();
  void publish(const Failure& f);
  void on_failure(const Failure& f);
  void on_success();
  void on_event(const std::string& event);
  void after_event(const std::string& event);
  void schedule_keep_alive();
  void keep_alive_tick();
  void check_members();
  void finish_attempt();
  void restart_or_fail();
  void rejoin(int expected);
  void on_rejoined(const Config& next, const std::string& error);
  void final_failure();

  // supervisor_observe.cc: events, health, fault injection.
  void start_health_server();
  HealthSnapshot snapshot() const;
  void record_start(const Worker& w);
  void record_attempt_end();
  void record_rendezvous();
  void schedule_faults();

  // supervisor_watchdog.cc: hang detection (heartbeat pages, named
  // sections, torchrun's file-timer FIFO).
  void start_watchdog();
  void add_watchdog_env(EnvMap& env, int local_rank);
  void watch_timer_fifo();
  void watchdog_tick();
  void on_hang(Worker& w, const std::string& what);

  Config c_;
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
  // When this attempt's stop began: error files written before it belong to
  // failures, not to workers reacting to our signal.
  std::chrono::system_clock::time_point stop_started_;
  bool escalated_ = false;
  bool strays_killed_ = false;
  int agent_signal_ = 0;
  int exit_code_ = 1;
  // The current round's event, once the watcher delivered it.
  std::string event_;
  int dead_seen_ = 0;
  int keep_alive_ticks_ = 0;
  std::thread rendezvous_thread_;
  EventLog events_;
  std::unique_ptr<HealthServer> health_;
  std::vector<std::unique_ptr<asio::steady_timer>> fault_timers_;
  std::unique_ptr<HeartbeatMonitor> heartbeats_;
  std::unique_ptr<FileTimerServer> file_timer_;
  std::unique_ptr<asio::posix::stream_descriptor> timer_fifo_;
  std::unique_ptr<asio::steady_timer> watchdog_;
  // Why a worker was killed as hung, by local rank, for its failure report.
  std::map<int, std::string> hung_;
  // Last: destroyed first, so it never posts into a dead loop.
  std::unique_ptr<EventWatcher> watcher_;
};

}  // namespace cxxrun::agent
