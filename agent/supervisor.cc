#include "agent/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "agent/ctl_answers.h"
#include "agent/fault_injector.h"
#include "agent/process/guardian.h"
#include "agent/hang/watchdog.h"
#include "agent/hostname.h"
#include "agent/job_board.h"
#include "agent/keep_alive.h"
#include "agent/progress/progress_tracker.h"
#include "agent/phase.h"
#include "agent/round_gate.h"
#include "agent/rendezvous_link.h"
#include "agent/report/board_record.h"
#include "agent/report/reporter.h"
#include "agent/restart_policy.h"
#include "agent/signal_watch.h"
#include "agent/store_outage.h"
#include "agent/health/nvml_clocks.h"
#include "agent/straggler/straggler_watch.h"
#include "agent/verdict_gate.h"
#include "agent/workers/log_dir.h"
#include "agent/workers/worker_group.h"
#include "rendezvous/rendezvous.h"
#include "agent/forensics/summary.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;
using rendezvous::Rendezvous;
using rendezvous::RoundEvent;

// How long the exit waits for the link's call in flight before it takes the
// store as gone and abandons it. Every call against a store that answers
// ends well within it (a beat's or the board's deadline is shorter); a
// signal or a failure may end the job before the keep-alives judge a dead
// store lost, and its call in flight would hold the exit for read_timeout.
constexpr std::chrono::seconds kExitGrace{3};

long long wall_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

class Supervisor final : Workers::Listener {
 public:
  Supervisor(const Config& c, const rendezvous::Assignment& placement, LogDir& logs, Guardian* guardian,
             NodeHealth* health, Rendezvous& rdzv, const MakeWorkers& make_workers, std::function<void(int)> exit_now,
             const AgentStart& start)
      : c_(c), placement_(placement), round_(placement.round), rdzv_(rdzv), window_(io_),
        host_(this_hostname()), exit_now_(std::move(exit_now)),
        group_(make_workers(io_, *this)),
        signals_(io_, c_, *group_, guardian, log_, [this](int sig) {
          shut_down(sig, fmt::format("received {}", signal_name(sig)));
        }),
        watchdog_(io_, c_, logs, *group_,
                  [this](const Worker& w, const HangWatchdog::Report& r) {
                    reporter_.worker_hung(w, r);
                    goodput_.hang(r.silent_since);
                  }),
        progress_(io_, c_, [this] { return watchdog_.highest_step(); }),
        faults_(io_, *group_, [this](const rendezvous::StoreFault& f) { link_->call(inject(f)); }),
        reporter_(io_, c_, *group_, watchdog_, [this] { return group_state(); }, health),
        link_(std::make_unique<RendezvousLink>(io_, rdzv_)),
        keep_alive_(io_, *link_, rdzv_.keep_alive_interval(), c_.rdzv.settings.keep_alive_max_attempt,
                    // Members are judged in the barrier too: a node whose
                    // workers succeeded waited forever for one that died.
                    {[this] { return phase_ == Phase::rendezvous; },
                     [this] { return phase_ == Phase::running || phase_ == Phase::barrier; },
                     [this](std::chrono::milliseconds silent) { on_store_lost(silent); },
                     [this] { on_store_regained(); },
                     [this](const Rendezvous::Liveness& l) { on_members_dead(l); }}),
        gate_(io_, c_, health, reporter_, *link_, log_), verdicts_(c_, logs.run_dir(), *link_, reporter_, host_),
        outage_(c_, rdzv_.survives_store_outage(), reporter_, log_), start_(start),
        goodput_(start.at, start.wall, [this](const PhaseSpan& s) { reporter_.phase(s); }),
        stragglers_(io_, c_, *group_, watchdog_, [] { std::string no; return NvmlClocks::open(no); },
                    [this](auto call) { link_->call(std::move(call)); },
                    {[this] { return phase_ == Phase::running; }, [this](auto& n) { reporter_.straggler(n); },
                     [this](auto& v) { reporter_.speeds(v); }, [this](auto& why) { gate_.leave_next(why); }}),
        board_(io_, *link_, board_node_, [this] { return board_record_now(); },
               [this](const rendezvous::board::StopRequest& r) { on_stop_request(r); }, wall_ms(start.wall)) {
    set_logger();
    reporter_.set_goodput([this] { return goodput_.totals(std::chrono::steady_clock::now(), progress_.record()); });
    // Every line: the ranks' output cxxrunctl logs reads, and the progress
    // pattern's (and the straggler watch's steps) when one is set.
    group_->observe_lines([this](int local_rank, std::string_view line) {
      if (progress_.watches_output()) {
        progress_.line(line);
        stragglers_.line(local_rank, line);
      }
      answers_.line(placement_.base_rank + local_rank, line);
    });
  }

  ~Supervisor() {
    group_->observe_lines({});  // the group outlives the tracker, and may drain a pipe yet
    // A call in flight against a store that is gone would hold this exit for
    // read_timeout in the join below, after "exiting with code 244": abandon
    // a store judged lost at once, and one that still holds the call after
    // kExitGrace.
    if (store_lost_ || !link_->settle(kExitGrace)) rdzv_.abandon();
    link_.reset();  // joins its thread: nothing else calls the rendezvous now
    board_.last(rdzv_);  // the record that shows this agent done (agent/job_board.h)
    if (rdzv_.elastic()) {
      rdzv_.watch({});
      rdzv_.watch_requests({});
    }
  }

  int run() {
    signals_.start();
    if (rdzv_.elastic()) link_->call([this](Rendezvous& r) -> RendezvousLink::Then {
      r.watch([this](int round, RoundEvent e) { asio::post(io_, [this, round, e] { on_round_event(round, e); }); });
      return {};
    });
    reporter_.rendezvous_done(placement_, attempt_);
    goodput_.rendezvous_began(start_.join_began);
    goodput_.rendezvous_done(start_.joined);
    start_attempt();
    if (rdzv_.elastic()) {
      board_.start();
      answers_.start();
    }
    io_.run();
    return exit_code_;
  }

 private:
  // Workers::Listener
  void on_worker_started(const Worker& w) override {
    progress_.worker_started();
    reporter_.worker_started(w);
    board_.changed();
  }
  void on_worker_exited(const Worker& w) override {
    watchdog_.forget(w.pid);
    board_.changed();
    // Everyone ended on their own while the group waited for more failures.
    if (collecting_ && group_->running() == 0) asio::post(io_, [this] {
      if (collecting_) stop(cause_, SIGTERM);
    });
  }
  void on_worker_paused(const Worker& w) override { reporter_.worker_paused(w); }
  void on_worker_failed(const Failure& f) override {
    publish(f);
    // A communication error is most often a peer's failure seen from here:
    // that peer may be still exiting on its own, its traceback not out yet,
    // and a stop now would kill it before it says why (agent/forensics/failure.h,
    // kConsequenceWindow). Any other failure, or the group's end, stops it.
    const bool consequence = communication_error(f) && group_->running() > 0;
    if (collecting_ && consequence) return;
    if (!collecting_ && consequence && phase_ == Phase::running) {
      log_->warn("rank {} failed with a communication error, most often a consequence of another rank's failure; "
                 "waiting up to {} ms for the other workers to end on their own before stopping them",
                 f.rank, std::chrono::duration_cast<std::chrono::milliseconds>(kConsequenceWindow).count());
      return collect(Cause::failure);
    }
    stop(Cause::failure, SIGTERM);
  }
  void on_earlier_failure(const Failure& f) override { publish(f); }
  void on_group_succeeded() override {
    log_->info("all {} workers succeeded", group_->workers().size());
    if (rdzv_.elastic()) link_->call([this, round = round_](Rendezvous& r) -> RendezvousLink::Then {
      const RoundEvent e = r.finish_round();
      return [this, round, e] { on_round_event(round, e); };
    });
    stop(Cause::success, SIGTERM);
  }
  void on_group_stopped() override {
    const auto record = progress_.attempt_ended();
    if (record) {
      log_->info("{}", describe(*record));
      reporter_.attempt_progress(*record);
    }
    outcome_ = outcome_of(record);
    goodput_.attempt_ended(progress_.record(), cause_ == Cause::success, std::chrono::steady_clock::now());
    reporter_.attempt_ended(cause_ == Cause::success);
    judge_then_act();
  }

  // A failed attempt is judged before the policy acts on it: every node
  // shares what it saw and acts on one verdict (agent/verdict/job_history.h).
  void judge_then_act() {
    const Situation s = situation();
    const Decision d = decide(s);
    if (!verdicts_.judges() || !(d.uses_budget || (d.action == Action::fail && !s.unkillable))) return act(d);
    phase_ = Phase::judging;
    verdicts_.judge(attempt_, round_, outcome_, group_->failures(), [this](const History& h) {
      if (phase_ == Phase::judging) on_verdict(h);
    });
  }

  void on_verdict(const History& h) {
    repeats_without_progress_ = h.stop;
    repeats_across_runs_ = h.stop && verdicts_.spans_runs(h);
    const Decision d = decide(situation());
    if (d.action == Action::fail && h.stop && (attempt_ < c_.max_restarts || repeats_across_runs_))
      log_->error("{}", h.evidence);
    else if ((d.action == Action::restart || d.action == Action::reform) && (h.tracked || h.oom))
      log_->info("{}", h.evidence);
    act(d);
  }

  void set_logger() {
    log_ = spdlog::default_logger()->clone("cxxrun node" + std::to_string(placement_.group_rank));
  }

  static RendezvousLink::Call inject(const rendezvous::StoreFault& f) {
    return [f](Rendezvous& r) -> RendezvousLink::Then {
      r.inject(f);
      return {};
    };
  }

  void start_attempt() {
    phase_ = Phase::running;
    outcome_ = {};
    cause_ = Cause::success;
    job_event_ = RoundEvent::none;
    alive_nodes_ = placement_.group_world_size;
    watchdog_.new_attempt(attempt_);
    watchdog_.set_judging(true);
    progress_.attempt_started(attempt_);
    goodput_.attempt_started(attempt_, std::chrono::steady_clock::now());
    stragglers_.attempt_started(placement_);
    faults_.schedule(c_, placement_, attempt_, [this] { return phase_ == Phase::running; });
    group_->start(c_, placement_, attempt_,
                 [this](EnvMap& env, int local_rank) { watchdog_.add_env(env, local_rank); });
  }

  // Every node's summary lists this failure: the rendezvous carries it.
  void publish(const Failure& f) {
    // A worker this node cannot kill is this node's trouble: the others see
    // it leave, and re-form without it.
    if (!rdzv_.elastic() || f.unkillable) return;
    link_->call([record = to_record(f, host_)](Rendezvous& r) -> RendezvousLink::Then {
      r.publish_failure(record);
      return {};
    });
  }

  // The group goes on for kConsequenceWindow after a communication error,
  // for the failure it follows; nothing else is judged or started meanwhile.
  void collect(Cause cause) {
    phase_ = Phase::stopping;
    cause_ = cause;
    collecting_ = true;
    watchdog_.set_judging(false);
    goodput_.stop_requested(std::chrono::steady_clock::now());
    window_.expires_after(kConsequenceWindow);
    window_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec && collecting_) stop(cause_, SIGTERM);
    });
  }

  // A worker failed on another node. When every failure published so far
  // is a communication error, the failure it follows may be one of this
  // node's ranks, still exiting on its own: the group runs on as for a
  // local one (collect). Otherwise, or when the records cannot be read, it
  // stops at once.
  void on_remote_failure() {
    log_->warn("a worker failed on another node; stopping this node's workers");
    collect(Cause::remote_failure);
    link_->call([this, round = round_](Rendezvous& r) -> RendezvousLink::Then {
      const bool consequence = only_communication_errors(r.published_failures());
      return [this, round, consequence] {
        if (!collecting_ || round != round_) return;
        if (!consequence || group_->running() == 0) return stop(Cause::remote_failure, SIGTERM);
        log_->warn("the failure on another node is a communication error, most often a consequence of another "
                   "rank's failure; waiting up to {} ms for this node's workers to end on their own",
                   std::chrono::duration_cast<std::chrono::milliseconds>(kConsequenceWindow).count());
      };
    });
  }

  void stop(Cause cause, int sig) {
    collecting_ = false;
    window_.cancel();
    phase_ = Phase::stopping;
    cause_ = cause;
    watchdog_.set_judging(false);
    goodput_.stop_requested(std::chrono::steady_clock::now());
    group_->stop(sig, cause == Cause::failure || cause == Cause::remote_failure);
    board_.changed();
  }

  Situation situation() const {
    Situation s;
    s.cause = cause_;
    s.job = job_event_;
    s.elastic = rdzv_.elastic();
    s.attempt = attempt_;
    s.max_restarts = c_.max_restarts;
    s.signal = agent_signal_;
    s.alive_nodes = alive_nodes_;
    s.min_nodes = c_.rdzv.settings.min_nodes;
    s.summary = summary_;
    s.repeats_without_progress = repeats_without_progress_;
    s.repeats_across_runs = repeats_across_runs_;
    const auto& failures = group_->failures();
    s.unkillable = std::any_of(failures.begin(), failures.end(), [](const Failure& f) { return f.unkillable; });
    return s;
  }

  void act(const Decision& d) {
    switch (d.action) {
      case Action::exit: return finish(d.code);
      case Action::wait:
        log_->info("waiting for the other nodes to finish");
        phase_ = Phase::barrier;
        barrier_since_ = std::chrono::steady_clock::now();
        return;
      case Action::fail: return report_failure();
      case Action::restart:
      case Action::reform:
        if (d.uses_budget) count_restart();
        if (cause_ == Cause::failure) gate_.own_failure();
        phase_ = Phase::restarting;
        return gate_.before_round(
            [this, reform_next = d.action == Action::reform] {
              if (phase_ != Phase::restarting) return;  // a signal ended the job meanwhile
              reform_next ? reform() : restart_here();
            },
            [this] {
              if (phase_ == Phase::restarting) end(Cause::unhealthy);
            });
    }
  }

  void count_restart() {
    ++attempt_;
    const auto& failures = group_->failures();
    std::string what = failures.empty() ? "" : describe(failures[0]);
    if (cause_ == Cause::remote_failure || (cause_ == Cause::success && job_event_ == RoundEvent::abort))
      what = "a worker failed on another node" + (what.empty() ? "" : "; here " + what);
    log_->warn("worker group failed ({}); restarting, attempt {} of {} restarts", what, attempt_, c_.max_restarts);
    reporter_.restarting(attempt_, what);
  }

  void restart_here() {
    phase_ = Phase::restarting;
    link_->call([this](Rendezvous& r) -> RendezvousLink::Then {
      std::string error;
      try {
        r.renew_worker_store();
      } catch (const std::exception& e) {
        error = e.what();
      }
      return [this, error] {
        if (phase_ != Phase::restarting) return;
        if (!error.empty()) {
          log_->error("{}", error);
          return end(Cause::rendezvous_failed);
        }
        start_attempt();
      };
    });
  }

  void reform() {
    phase_ = Phase::rendezvous;
    rejoining_ = true;
    goodput_.rendezvous_began(std::chrono::steady_clock::now());
    link_->call([this](Rendezvous& r) -> RendezvousLink::Then {
      try {
        const rendezvous::Assignment a = r.rejoin();
        return [this, a] {
          rejoining_ = false;
          on_rejoined(a);
        };
      } catch (const std::exception& e) {
        std::string error = e.what();
        if (error.empty()) error = "rendezvous failed";
        // Too few nodes left, or the store gone, is the job lost, not a
        // failure to join (agent/exit_codes.h); a member the next round
        // filled without (a spare came first) waited as a spare, and the
        // job succeeded without it.
        const Cause cause = dynamic_cast<const rendezvous::RendezvousLost*>(&e)     ? Cause::lost
                            : dynamic_cast<const rendezvous::RendezvousClosed*>(&e) ? Cause::released
                                                                                     : Cause::rendezvous_failed;
        return [this, error, cause] {
          rejoining_ = false;
          log_->error("{}", error);
          end(cause);
        };
      }
    });
  }

  void on_rejoined(const rendezvous::Assignment& a) {
    placement_ = a;
    round_ = a.round;
    set_logger();
    on_store_regained();  // the rendezvous went through it
    reporter_.rendezvous_done(placement_, attempt_);
    goodput_.rendezvous_done(std::chrono::steady_clock::now());
    start_attempt();
  }

  // Our workers are stopped or still running; `e` is what the rest of the
  // job did in `round`.
  void on_round_event(int round, RoundEvent e) {
    // An event of a round this node already left is old news.
    if (e == RoundEvent::none || round != round_ || phase_ == Phase::rendezvous || phase_ == Phase::done) return;
    job_event_ = e;
    if (phase_ == Phase::barrier) return judge_then_act();
    if (phase_ != Phase::running) return;  // already stopping: the decision reads job_event_
    switch (e) {
      case RoundEvent::abort: return on_remote_failure();
      case RoundEvent::join:
        log_->info("a node is waiting to join; restarting the job to take it in");
        return stop(Cause::membership, SIGTERM);
      case RoundEvent::dead:
        log_->warn("a node stopped sending keep-alives; restarting the job without it");
        return stop(Cause::membership, SIGTERM);
      case RoundEvent::done:
      case RoundEvent::none: return;
    }
  }

  // The summary lists every node's first failure (from the rendezvous) and
  // this node's own, on every node, root cause first.
  void report_failure() {
    phase_ = Phase::reporting;
    verdicts_.gather_failures(group_->failures(), [this](std::vector<Failure> failures) {
      if (phase_ == Phase::reporting) print_summary(std::move(failures));
    });
  }

  void print_summary(std::vector<Failure> failures) {
    summary_ = std::move(failures);
    if (summary_.empty()) {
      log_->error("the job failed on another node, and its failure record could not be read");
    } else {
      const std::string summary = format_summary(c_.entrypoint_name, host_, summary_);
      (void)!write(STDERR_FILENO, summary.data(), summary.size());
    }
    end(Cause::reported);
  }

  void on_store_lost(std::chrono::milliseconds silent) {
    if (phase_ != Phase::barrier && phase_ != Phase::running) return;
    std::optional<std::chrono::steady_clock::duration> waited;
    if (phase_ == Phase::barrier) waited = std::chrono::steady_clock::now() - barrier_since_;
    switch (outage_.silent(silent, waited)) {
      case StoreOutage::Then::nothing: return;
      case StoreOutage::Then::end_job: store_lost_ = true; return end(Cause::lost);
      case StoreOutage::Then::stop_workers: store_lost_ = true; return stop(Cause::lost, SIGTERM);
    }
  }

  void on_store_regained() { outage_.regained(); }

  void on_members_dead(const Rendezvous::Liveness& l) {
    alive_nodes_ = l.alive;
    const auto& s = c_.rdzv.settings;
    if (l.alive >= s.min_nodes) return;  // the round's `dead` event restarts the job
    log_->error("{}", rendezvous::too_few_alive(s, l.alive));
    // In the barrier no worker runs: nothing to stop.
    if (phase_ == Phase::barrier) return end(Cause::lost);
    stop(Cause::lost, SIGTERM);
  }

  // cxxrunctl stop: the whole job stops as on SIGTERM (docs/cxxrunctl.md).
  void on_stop_request(const rendezvous::board::StopRequest& r) {
    if (phase_ == Phase::done) return;
    shut_down(SIGTERM, fmt::format("cxxrunctl stop ({}) asks the job to stop: SIGTERM", r.why));
  }

  // The job ends on this node for signal `sig`; `what` says why.
  void shut_down(int sig, const std::string& what) {
    if (phase_ == Phase::rendezvous) {
      log_->warn("{} during the rendezvous; exiting", what);
      agent_signal_ = sig;
      return end(Cause::signal);
    }
    if (phase_ == Phase::stopping && cause_ == Cause::signal) {
      log_->warn("{} again; killing workers now", what);
      return group_->escalate();
    }
    log_->warn("{}; forwarding it to workers and shutting down", what);
    agent_signal_ = sig;
    if (phase_ == Phase::running || phase_ == Phase::stopping) return stop(Cause::signal, sig);
    // No worker runs: the policy decides at once.
    cause_ = Cause::signal;
    act(decide(situation()));
  }

  std::string board_record_now() const {
    BoardFacts f;
    f.node = board_node_;
    f.host = host_;
    f.agent_pid = ::getpid();
    f.round = round_;
    f.phase = phase_name(phase_);
    f.attempt = attempt_;
    if (const AttemptRecord* r = progress_.record(); r != nullptr && r->highest) {
      f.step = r->highest->step;
      f.seconds_since_progress = std::chrono::duration<double>(std::chrono::steady_clock::now() - r->highest->at).count();
    }
    f.updated_ms = wall_ms(std::chrono::system_clock::now());
    return board_record(f, reporter_.snapshot(), rendezvous::board::kMaxRecordBytes);
  }

  GroupState group_state() const { return agent::group_state(phase_, group_->paused(), exit_code_); }

  // The job ends here for `cause`, with the code the policy gives it.
  void end(Cause cause) {
    cause_ = cause;
    act(decide(situation()));
  }

  // Only act() calls it: every exit code comes from decide().
  void finish(int code) {
    const GoodputTotals spent = goodput_.finish(std::chrono::steady_clock::now());
    log_->info("{}", describe(spent));  // after the failure summary, when there is one
    reporter_.goodput(spent);
    log_->info("exiting with code {}", code);
    reporter_.exiting(code, summary_.empty() ? nullptr : &summary_.front());
    if (rejoining_) {
      // The link is blocked in the rendezvous (up to join_timeout) and no
      // worker runs: leave now; the guardian cleans up after us.
      spdlog::default_logger()->flush();
      exit_now_(code);
    }
    exit_code_ = code;
    phase_ = Phase::done;
    signals_.cancel();
    keep_alive_.cancel();
    board_.cancel();
    io_.stop();
  }

  // What the user asked for, unchanged; and where this node sits in the
  // current round, which each rendezvous replaces.
  const Config c_;
  rendezvous::Assignment placement_;
  int round_;
  bool store_lost_ = false;  // the job ends because the rendezvous store is gone
  Rendezvous& rdzv_;
  asio::io_context io_;
  asio::steady_timer window_;  // kConsequenceWindow after a communication error
  const std::string host_;
  // std::_Exit, unless a test gives another (agent/supervisor.h).
  const std::function<void(int)> exit_now_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<Workers> group_;
  SignalWatch signals_;  // SIGCHLD, and the signals that end the job or reach the workers
  HangWatchdog watchdog_;
  ProgressTracker progress_;
  FaultInjector faults_;
  Reporter reporter_;
  std::unique_ptr<RendezvousLink> link_;
  KeepAlive keep_alive_;
  RoundGate gate_;
  VerdictGate verdicts_;
  StoreOutage outage_;
  const AgentStart start_;
  Goodput goodput_;  // where this node's wall time went (agent/progress/goodput.h)
  StragglerWatch stragglers_;  // slower ranks and nodes (agent/straggler/straggler_watch.h)
  const std::string board_node_ = JobBoard::node_id(host_, wall_ms(start_.wall));
  JobBoard board_;  // this node's record for cxxrunctl (agent/job_board.h)
  // cxxrunctl's requests (agent/ctl_answers.h); its stacks are the hang watchdog's, taken for a look.
  CtlAnswers answers_{io_, *link_, board_node_, host_, [this](StacksDone done) { watchdog_.stacks_now(std::move(done)); }};

  Phase phase_ = Phase::running;
  Cause cause_ = Cause::success;
  RoundEvent job_event_ = RoundEvent::none;
  int attempt_ = 0;
  int alive_nodes_ = 1;
  int agent_signal_ = 0;
  bool collecting_ = false;  // waiting out kConsequenceWindow before stopping the group
  bool rejoining_ = false;  // the link is in Rendezvous::rejoin(), which may block up to join_timeout
  std::vector<Failure> summary_;  // what the failure summary showed
  NodeOutcome outcome_;  // what this node saw of the last attempt's progress
  bool repeats_without_progress_ = false;  // the settled verdict stops the job
  bool repeats_across_runs_ = false;       // and its streak began in an earlier run (a requeue)
  std::chrono::steady_clock::time_point barrier_since_{};
  int exit_code_ = exit_code::internal_error;
};

}  // namespace

int supervise(const Config& config, const rendezvous::Assignment& first, LogDir& logs, Guardian& guardian,
              JobCgroup* cgroup, Forkserver* forkserver, Postmortem& postmortem, NodeHealth& health, Rendezvous& rdzv,
              const std::string& job_token, const AgentStart& start) {
  const MakeWorkers real = [&](asio::io_context& io, Workers::Listener& listener) -> std::unique_ptr<Workers> {
    return std::make_unique<WorkerGroup>(io, logs, job_token, cgroup, guardian.pid(), forkserver, &postmortem, listener);
  };
  return supervise(config, first, logs, &guardian, &health, rdzv, real, [](int code) { std::_Exit(code); }, start);
}

int supervise(const Config& config, const rendezvous::Assignment& first, LogDir& logs, Guardian* guardian,
              NodeHealth* health, Rendezvous& rdzv, const MakeWorkers& make_workers,
              const std::function<void(int)>& exit_now, const AgentStart& start) {
  Supervisor s(config, first, logs, guardian, health, rdzv, make_workers, exit_now, start);
  return s.run();
}

}  // namespace cxxrun::agent
