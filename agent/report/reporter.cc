#include "agent/report/reporter.h"

#include <sys/wait.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/hang/watchdog.h"
#include "agent/report/health_server.h"
#include "agent/health/node_health.h"
#include "agent/straggler/action.h"
#include "agent/workers/workers.h"

namespace cxxrun::agent {

Reporter::Reporter(boost::asio::io_context& io, const Config& config, const Workers& group,
                   const HangWatchdog& watchdog, std::function<GroupState()> state, const NodeHealth* checks)
    : c_(config), group_(group), watchdog_(watchdog), state_(std::move(state)), health_checks_(checks),
      events_(config.event_log, config.event_log_console) {
  if (c_.health_port < 0) return;
  health_ = std::make_unique<HealthServer>(io, c_.health_host, c_.health_port, [this] { return snapshot(); });
  spdlog::info("health endpoint on http://{}/healthz and /metrics", health_->address());
}

Reporter::~Reporter() = default;

void Reporter::rendezvous_done(const rendezvous::Assignment& placement, int attempt) {
  placement_ = placement;
  attempt_ = attempt;
  events_.context() = event_context(c_, placement_, attempt_);
  events_.agent_event(AgentEvent::rendezvous);
}

void Reporter::worker_started(const Worker& w) {
  events_.worker_status(WorkerStatus::start, WorkerRef{w.local_rank, w.rank, w.pid});
}

void Reporter::worker_hung(const Worker& w, const HangWatchdog::Report& r) {
  last_hang_ = r;
  EventDetails details;
  details.extra["reason"] = r.what;
  if (!r.picture.empty()) details.extra["hang"] = r.picture;
  if (!r.bundle.empty()) details.extra["stacks"] = r.bundle;
  if (!r.stack.empty()) details.raw_error = nlohmann::json{{"message", r.stack}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  events_.worker_status(WorkerStatus::unhealthy, WorkerRef{w.local_rank, w.rank, w.pid}, details);
}

void Reporter::worker_paused(const Worker& w) {
  EventDetails details;
  details.extra["reason"] = w.paused_since ? "stopped by a signal" : "continued";
  events_.worker_status(w.paused_since ? WorkerStatus::unhealthy : WorkerStatus::healthy,
                        WorkerRef{w.local_rank, w.rank, w.pid}, details);
}

void Reporter::attempt_ended(bool succeeded) {
  for (const Failure& f : group_.failures()) {
    ++failures_by_cause_[cause_of(f)];
    if (f.unkillable) node_healthy_ = false;
  }
  if (!events_.enabled()) return;
  for (const auto& w : group_.workers()) {
    const Failure* failed = nullptr;
    for (const auto& f : group_.failures())
      if (f.local_rank == w->local_rank) failed = &f;
    if (failed)
      events_.worker_failed(*failed);
    else
      events_.worker_status(succeeded ? WorkerStatus::succeeded : WorkerStatus::terminated,
                            WorkerRef{w->local_rank, w->rank, w->pid});
  }
}

void Reporter::attempt_progress(const AttemptRecord& r) {
  if (!events_.enabled()) return;
  // Times after the spawn, in ms: the event's own timestamp is the end, so
  // a reader places every boundary on the wall clock from duration_ms.
  const auto ms = [&r](AttemptRecord::Clock::time_point at) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(at - r.started).count());
  };
  const auto end = r.ended.value_or(AttemptRecord::Clock::now());
  EventDetails details;
  details.duration_ms = std::chrono::duration<double, std::milli>(r.duration(end)).count();
  details.extra["attempt"] = static_cast<long long>(r.attempt);
  if (r.first_progress) details.extra["first_progress_ms"] = std::max(0LL, ms(*r.first_progress));
  if (r.highest) {
    details.extra["step"] = static_cast<long long>(r.highest->step);
    details.extra["step_source"] = std::string(step_source_name(r.highest->source));
    details.extra["step_ms"] = std::max(0LL, ms(r.highest->at));
  }
  if (auto rate = r.steps_per_second()) details.extra["steps_per_s"] = *rate;
  details.extra["checkpoints"] = static_cast<long long>(r.checkpoints);
  if (r.last_checkpoint) {
    details.extra["checkpoint"] = r.last_checkpoint->name;
    if (r.last_checkpoint->step) details.extra["checkpoint_step"] = static_cast<long long>(*r.last_checkpoint->step);
    details.extra["checkpoint_ms"] = std::max(0LL, ms(r.last_checkpoint->at));
  }
  events_.agent_event(AgentEvent::attempt_progress, details);
}

void Reporter::verdict(int attempt, const History& h) {
  if (!events_.enabled()) return;
  EventDetails details;
  details.extra["attempt"] = static_cast<long long>(attempt);
  details.extra["verdict"] = std::string(h.stop ? "stop" : "restart");
  details.extra["cause"] = h.cause;
  details.extra["repeats"] = static_cast<long long>(h.repeats);
  details.extra["judged"] = static_cast<long long>(h.judged);
  details.extra["evidence"] = h.evidence;
  if (h.at_step) details.extra["step"] = static_cast<long long>(*h.at_step);
  if (h.best_step) details.extra["best_step"] = static_cast<long long>(*h.best_step);
  if (h.checkpoint_step) details.extra["checkpoint_step"] = static_cast<long long>(*h.checkpoint_step);
  events_.agent_event(AgentEvent::verdict, details);
}

void Reporter::restarting(int attempt, const std::string& why) {
  attempt_ = attempt;
  EventDetails details;
  details.extra["reason"] = why;
  events_.context().restart_count = attempt;
  events_.agent_event(AgentEvent::restart, details);
}

void Reporter::phase(const PhaseSpan& span) {
  if (!events_.enabled()) return;
  EventDetails details;
  details.duration_ms = std::chrono::duration<double, std::milli>(span.end - span.start).count();
  details.extra["phase"] = std::string(goodput_phase_name(span.phase));
  details.extra["attempt"] = static_cast<long long>(span.attempt);
  details.extra["start_ms"] = span.start_ms;
  details.extra["end_ms"] = span.end_ms;
  events_.agent_event(AgentEvent::phase, details);
}

void Reporter::goodput(const GoodputTotals& t) {
  if (!events_.enabled()) return;
  const auto ms = [](std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); };
  EventDetails details;
  details.extra["goodput"] = t.ratio();
  details.extra["wall_ms"] = ms(t.wall);
  for (GoodputPhase p : kAllGoodputPhases) details.extra[std::string(goodput_phase_name(p)) + "_ms"] = ms(t[p]);
  events_.agent_event(AgentEvent::goodput, details);
}

void Reporter::straggler(const StragglerNews& n) {
  EventDetails details;
  details.extra["state"] = std::string(n.named ? "named" : "cleared");
  details.extra["scope"] = std::string(n.node ? "node" : "rank");
  details.extra["rank"] = static_cast<long long>(n.rank);
  details.extra["ranks"] = static_cast<long long>(n.ranks);
  details.extra["node_rank"] = static_cast<long long>(n.group_rank);
  details.extra["host"] = n.host;
  details.extra["signal"] = n.signal;
  details.extra["ratio"] = n.ratio;
  details.extra["cause"] = n.cause;
  details.extra["action"] = std::string(straggler_action_name(c_.straggler_action));
  details.extra["line"] = n.line;
  events_.agent_event(AgentEvent::straggler, details);
}

void Reporter::node_unhealthy(const std::string& check, const std::string& line) {
  node_healthy_ = false;
  events_.node_unhealthy(check, line);
}

void Reporter::exiting(int code, const Failure* root) {
  EventDetails details;
  if (code != 0) details.raw_error = "exit code " + std::to_string(code);
  if (code != 0 && root)
    *details.raw_error += ": rank " + std::to_string(root->rank) + (root->host.empty() ? "" : " on " + root->host) +
                          ": " + explain(*root);
  events_.agent_event(code == 0 ? AgentEvent::succeeded : AgentEvent::failed, details);
}

HealthSnapshot Reporter::snapshot() const {
  HealthSnapshot h;
  h.state = state_();
  h.run_id = c_.run_id;
  h.role = c_.role;
  h.group_rank = placement_.group_rank;
  h.group_world_size = placement_.group_world_size;
  h.restart_count = attempt_;
  h.max_restarts = c_.max_restarts;
  if (unreachable_since_)
    h.rendezvous_unreachable_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - *unreachable_since_).count();
  h.node_healthy = node_healthy_;
  if (health_checks_)
    for (const CheckResult& c : health_checks_->last())
      h.checks.push_back({c.name, c.healthy, c.detail, std::chrono::duration<double>(c.took).count()});
  if (last_hang_) h.last_hang = HangHealth{last_hang_->what, last_hang_->picture, last_hang_->bundle, last_hang_->rank,
                                           last_hang_->stack};
  for (Death d : kAllDeaths) {
    const auto n = failures_by_cause_.find(d);
    h.failures_by_cause.emplace_back(death_name(d), n == failures_by_cause_.end() ? 0 : n->second);
  }
  for (const Failure& f : group_.failures())
    if (f.unkillable) h.node_healthy = false;
  if (goodput_) {
    const GoodputTotals t = goodput_();
    for (GoodputPhase p : kAllGoodputPhases)
      h.phase_seconds.emplace_back(goodput_phase_name(p), std::chrono::duration<double>(t[p]).count());
    h.goodput_ratio = t.ratio();
  }
  h.speeds = speeds_;
  for (const auto& w : group_.workers()) {
    WorkerHealth wh;
    wh.local_rank = w->local_rank;
    wh.rank = w->rank;
    wh.pid = w->pid > 0 ? w->pid : 0;
    if (w->running)
      wh.state = w->paused_since ? WorkerRunState::paused : WorkerRunState::running;
    else if (w->pid > 0 && WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0)
      wh.state = WorkerRunState::succeeded;
    else
      wh.state = h.state == GroupState::healthy || h.state == GroupState::unhealthy || w->pid <= 0
                     ? WorkerRunState::failed
                     : WorkerRunState::stopped;
    wh.seconds_since_heartbeat = watchdog_.seconds_since_beat(w->local_rank);
    for (const Failure& f : group_.failures())
      if (f.local_rank == w->local_rank && f.host.empty()) {
        wh.cause = death_name(cause_of(f));
        wh.cause_detail = explain(f);
      }
    h.workers.push_back(wh);
  }
  return h;
}

}  // namespace cxxrun::agent
