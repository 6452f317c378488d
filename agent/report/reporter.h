// What the agent tells the outside world about its job: torchelastic's
// events (--event-log, agent/report/event_log.h) and the health endpoint
// (--health-port, agent/report/health_server.h). It reads the worker group and the
// watchdog; nothing it does changes the job.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agent/config.h"
#include "agent/report/event_log.h"
#include "agent/forensics/death.h"
#include "agent/forensics/failure.h"
#include "agent/hang/watchdog.h"
#include "agent/progress/attempt_record.h"
#include "agent/progress/goodput.h"
#include "agent/report/health_snapshot.h"
#include "agent/straggler/straggler_news.h"
#include "agent/verdict/history.h"

namespace cxxrun::agent {

class NodeHealth;

class HealthServer;
class Workers;
struct Worker;

class Reporter {
 public:
  // `state` says what the group is doing, for /healthz.
  // `checks`: whose last verdicts /healthz and /metrics show (nullptr: none).
  Reporter(boost::asio::io_context& io, const Config& config, const Workers& group, const HangWatchdog& watchdog,
           std::function<GroupState()> state, const NodeHealth* checks = nullptr);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // A new round or attempt: `config` has this node's place in it.
  void rendezvous_done(const rendezvous::Assignment& placement, int attempt);
  void worker_started(const Worker& w);
  // A hang verdict (agent/hang/watchdog.h) about to kill `w`: UNHEALTHY,
  // with the verdict, which rank stands apart and the stack; /healthz keeps
  // the last one.
  void worker_hung(const Worker& w, const HangWatchdog::Report& r);
  // Stopped by a signal (UNHEALTHY), or resumed (HEALTHY).
  void worker_paused(const Worker& w);
  // Per worker: FAILED (with its error) for this attempt's failures,
  // SUCCEEDED when the group succeeded, TERMINATED for those stopped.
  void attempt_ended(bool succeeded);
  // The attempt's progress (ATTEMPT_PROGRESS), once its group stopped.
  void attempt_progress(const AttemptRecord& record);
  // The settled restart verdict on attempt `attempt` (VERDICT).
  void verdict(int attempt, const History& h);
  void restarting(int attempt, const std::string& why);
  // A closed goodput span (PHASE), and the job's totals at the exit
  // (GOODPUT). `live` gives /metrics the totals so far.
  void phase(const PhaseSpan& span);
  void goodput(const GoodputTotals& totals);
  void set_goodput(std::function<GoodputTotals()> live) { goodput_ = std::move(live); }
  // A rank or node named slower than its peers, or cleared (STRAGGLER);
  // each window's view of this node's ranks (/metrics).
  void straggler(const StragglerNews& news);
  void speeds(const SpeedView& view) { speeds_ = view; }
  // This node failed `check` before a round and steps out (NODE_UNHEALTHY).
  void node_unhealthy(const std::string& check, const std::string& line);

  // The rendezvous store is unreachable since `since` (a replicated store
  // without quorum, while the workers go on), or reachable again: /healthz.
  void rendezvous_unreachable(std::chrono::steady_clock::time_point since) { unreachable_since_ = since; }
  void rendezvous_reachable() { unreachable_since_.reset(); }
  // The agent exits with `code`; `root` is the failure summary's root cause
  // (nullptr: none), whose cause the AGENT FAILED event names.
  void exiting(int code, const Failure* root);

  // What /healthz shows now; the job board's record is built from it too
  // (agent/report/board_record.h). On the loop.
  HealthSnapshot snapshot() const;

 private:

  Config c_;
  rendezvous::Assignment placement_;
  int attempt_ = 0;
  std::optional<std::chrono::steady_clock::time_point> unreachable_since_;
  std::map<Death, int> failures_by_cause_;  // since the agent started
  bool node_healthy_ = true;                // false once a worker was unkillable
  std::optional<HangWatchdog::Report> last_hang_;
  SpeedView speeds_;
  const Workers& group_;
  const HangWatchdog& watchdog_;
  std::function<GroupState()> state_;
  std::function<GoodputTotals()> goodput_;
  const NodeHealth* health_checks_ = nullptr;
  EventLog events_;
  std::unique_ptr<HealthServer> health_;
};

}  // namespace cxxrun::agent
