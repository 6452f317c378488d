// Hang detection: a worker that stops beating (--heartbeat-timeout),
// overstays a named section (--section-timeout), or lets one of torchrun's
// file-timer scopes expire (TORCHELASTIC_ENABLE_FILE_TIMER), or a node where
// no worker made progress for --hang-timeout (agent/hang/progress_monitor.h).
// Every verdict, whichever judge gave it, takes one path: one log line,
// every running worker's stack into a bundle (agent/hang/stack_dump.h), the rank
// to blame chosen (agent/hang/culprit.h: a stopped worker, the rank that stands
// apart, or none), then the kill, whose failure carries the verdict, that
// choice, where every rank waits and the killed rank's stack. Whatever the
// judges say in one tick is one hang; after a kill that ends the attempt,
// nothing more. Checked every 100 ms, the interval of torchrun's file-timer
// server, and only when hang detection is on.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/forensics/killer.h"
#include "agent/hang/rank_stack.h"
#include "agent/process/worker_env_writer.h"

namespace cxxrun::agent {

class FileTimerServer;
class HeartbeatMonitor;
class LogDir;
class ProgressMonitor;
class StackDump;
class Workers;
struct Worker;

class HangWatchdog {
 public:
  // What a verdict found, once the stacks are in.
  struct Report {
    std::string what;     // the verdict: "local rank 1: no heartbeat for 10.2 s (timeout 10 s)"
    // agent/hang/culprit.h: whom it blames and where every rank waits: "rank 3
    // stands apart; ranks 0–2 wait in ...; rank 3 waits in ..."
    std::string picture;
    std::string bundle;   // where the stacks went ("" without a log directory)
    int rank = -1;        // the rank killed for it
    std::string stack;    // its stack
    // When the hang began: the judges' earliest silence (no beat, a section
    // open, no progress: the verdict's length before its tick); a file
    // timer's expiry says nothing of that, so its tick. Goodput counts from
    // here to the stop as hang detection (agent/progress/goodput.h).
    std::chrono::steady_clock::time_point silent_since{};
  };
  // `on_hang(worker, report)` is told of each verdict before the kill.
  using OnHang = std::function<void(const Worker& w, const Report& r)>;
  HangWatchdog(boost::asio::io_context& io, const Config& config, const LogDir& logs, Workers& group,
               OnHang on_hang);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Adds CXXRUN_HEARTBEAT_FILE / TORCHELASTIC_TIMER_FILE and the stack
  // hook's variables for a new worker.
  void add_env(EnvMap& env, int local_rank);
  // A new attempt: forget the last one's timers and progress. Judging runs
  // only while `judging` says the group runs.
  void new_attempt(int attempt);
  void forget(pid_t pid);
  void set_judging(bool judging) { judging_ = judging; }
  // The highest step a worker of this attempt reported through its page
  // (cxxrun.step(), cxxrun_step()) and how long ago; nullopt before any.
  // Every worker has a page; only the flags make it judged.
  std::optional<std::pair<uint64_t, std::chrono::nanoseconds>> highest_step() const;
  // The step local rank `local_rank` last reported through its page;
  // nullopt before any (straggler detection's step times).
  std::optional<uint64_t> step_of(int local_rank) const;
  // Seconds since the worker's last beat, when it has beaten (and beats are
  // judged: --heartbeat-timeout or --section-timeout).
  std::optional<double> seconds_since_beat(int local_rank) const;
  // Every running worker's stack, taken as a verdict takes them
  // (agent/hang/stack_dump.h, within kStackDeadline) but for a look only:
  // nothing is signalled but the stack hook, nothing stopped or killed, no
  // bundle written, no hang counted. `done` runs on the loop.
  void stacks_now(StacksDone done);

 private:
  void watch_timer_fifo();
  void tick();
  // One verdict of one judge: `what` happened to `rank` (-1: not a worker,
  // or, with job_wide, nobody in particular).
  struct Verdict {
    std::string what;
    Killer killer = Killer::hang;
    int sig = SIGKILL;
    pid_t pid = 0;
    int rank = -1;
    std::chrono::nanoseconds overdue{0};  // how far past its limit
    bool job_wide = false;                // --hang-timeout: no worker was named
    std::chrono::steady_clock::time_point silent_since = std::chrono::steady_clock::now();  // Report's
  };
  // Every judge is asked each tick, and whatever they say in that tick is
  // one hang: one line, one collection of stacks, one kill.
  void check_file_timers(std::vector<Verdict>& out);
  void check_heartbeats(std::vector<Verdict>& out);
  void check_progress(std::vector<Verdict>& out);
  // The stacks first, then whom the culprit analysis (agent/hang/culprit.h)
  // blames: it is killed, except that a file timer's expiry kills what the
  // worker asked for (torch's contract), with the analysis in its failure.
  void judge(const std::vector<Verdict>& verdicts);
  void act(const std::vector<Verdict>& verdicts, const std::map<int, std::string>& stacks, const std::string& bundle);
  void announce(const std::vector<Verdict>& verdicts);

  boost::asio::io_context& io_;
  const Config c_;
  Workers& group_;
  OnHang on_hang_;
  std::unique_ptr<HeartbeatMonitor> heartbeats_;  // every worker's page (nullptr: it could not be made)
  bool watch_heartbeats_ = false;  // the pages' beats and sections are judged
  std::unique_ptr<FileTimerServer> file_timer_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> timer_fifo_;
  std::unique_ptr<boost::asio::steady_timer> tick_;
  std::unique_ptr<ProgressMonitor> progress_;
  std::unique_ptr<StackDump> stacks_;
  std::unique_ptr<boost::asio::steady_timer> grace_;  // --stack-dump-signal's second before the kill
  int attempt_ = 0;
  int ticks_ = 0;
  bool judging_ = false;
  bool collecting_ = false;  // a verdict waits for its stacks: later ones are the same hang
  // A verdict killed a worker: its death ends the attempt, and what the
  // other ranks' judges say until then (their peer is gone) is the same hang.
  bool settled_ = false;
};

}  // namespace cxxrun::agent
