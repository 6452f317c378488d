// What the supervisor tells the outside world (the event log and the health
// endpoint), and the deterministic faults tests ask it to inject.
#include <signal.h>
#include <sys/wait.h>

#include <spdlog/spdlog.h>

#include "agent/health_server.h"
#include "agent/heartbeat_monitor.h"
#include "agent/meeting.h"
#include "agent/supervisor_impl.h"

namespace cxxrun::agent {

void Supervisor::start_health_server() {
  if (c_.health_port < 0) return;
  health_ = std::make_unique<HealthServer>(io_, c_.health_host, c_.health_port, [this] { return snapshot(); });
  log_->info("health endpoint on http://{}/healthz and /metrics", health_->address());
}

HealthSnapshot Supervisor::snapshot() const {
  HealthSnapshot h;
  switch (phase_) {
    case Phase::running: h.state = GroupState::healthy; break;
    case Phase::stopping:
    case Phase::rendezvous: h.state = GroupState::stopped; break;
    case Phase::barrier: h.state = GroupState::succeeded; break;
    case Phase::done: h.state = exit_code_ == 0 ? GroupState::succeeded : GroupState::failed; break;
  }
  h.run_id = c_.run_id;
  h.role = c_.role;
  h.group_rank = c_.group_rank;
  h.group_world_size = c_.group_world_size;
  h.restart_count = attempt_;
  h.max_restarts = c_.max_restarts;
  for (const auto& w : workers_) {
    WorkerHealth wh;
    wh.local_rank = w->local_rank;
    wh.rank = w->rank;
    wh.pid = w->pid > 0 ? w->pid : 0;
    if (w->running)
      wh.state = WorkerRunState::running;
    else if (w->pid > 0 && WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0)
      wh.state = WorkerRunState::succeeded;
    else
      wh.state = phase_ == Phase::running || w->pid <= 0 ? WorkerRunState::failed : WorkerRunState::stopped;
    if (heartbeats_)
      if (auto beat = heartbeats_->snapshot(w->local_rank); beat && beat->since_last_beat)
        wh.seconds_since_heartbeat = std::chrono::duration<double>(*beat->since_last_beat).count();
    h.workers.push_back(wh);
  }
  return h;
}

void Supervisor::record_start(const Worker& w) {
  events_.worker_status(WorkerStatus::start, WorkerRef{w.local_rank, w.rank, w.pid});
}

// Per worker: FAILED (with its error) for the failures of this attempt,
// SUCCEEDED when the group succeeded, TERMINATED for those the agent stopped.
void Supervisor::record_attempt_end() {
  if (!events_.enabled()) return;
  for (const auto& w : workers_) {
    const Failure* failed = nullptr;
    for (const auto& f : failures_)
      if (f.local_rank == w->local_rank) failed = &f;
    if (failed)
      events_.worker_failed(*failed);
    else
      events_.worker_status(reason_ == Reason::success ? WorkerStatus::succeeded : WorkerStatus::terminated,
                            WorkerRef{w->local_rank, w->rank, w->pid});
  }
}

void Supervisor::record_rendezvous() {
  events_.context() = event_context(c_, attempt_);
  events_.agent_event(AgentEvent::rendezvous);
}

// kill/stop faults fire at a fixed time after this attempt's start, on the
// node that holds the rank; store faults on the node with that group rank.
void Supervisor::schedule_faults() {
  fault_timers_.clear();
  for (const FaultSpec& f : c_.faults) {
    const bool worker_fault = f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::stop;
    if (worker_fault && (f.attempt != attempt_ || f.rank < c_.base_rank || f.rank >= c_.base_rank + c_.nproc_per_node))
      continue;
    if (!worker_fault && f.node != c_.group_rank) continue;
    if (f.kind == FaultSpec::Kind::delay_store) {
      meeting_.inject_store_delay(f.delay);
      continue;
    }
    auto timer = std::make_unique<asio::steady_timer>(io_, f.after);
    timer->async_wait([this, f](const boost::system::error_code& ec) {
      if (ec || phase_ != Phase::running) return;
      if (f.kind == FaultSpec::Kind::drop_store) {
        log_->warn("fault injection: dropping this node's store connection");
        watcher_.reset();
        return meeting_.inject_store_drop();
      }
      const int sig = f.kind == FaultSpec::Kind::stop ? SIGSTOP : f.signal;
      for (const auto& w : workers_)
        if (w->rank == f.rank && w->running) {
          log_->warn("fault injection: sending {} to rank {} (pid {})", signal_name(sig), w->rank, w->pid);
          kill(w->pid, sig);
        }
    });
    fault_timers_.push_back(std::move(timer));
  }
}

}  // namespace cxxrun::agent
