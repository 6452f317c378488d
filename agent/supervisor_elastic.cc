// What happens between attempts. On one node: restart the local group up to
// --max-restarts. With the c10d rendezvous, every node restarts together:
// the node that sees a failure writes it to the round's event key, every
// agent's watcher is woken by the store at once, each stops its workers,
// and all of them meet again in the next round. A node waiting to join, or
// a member whose keep-alives stopped, ends the round the same way without
// using the restart budget.
#include <unistd.h>

#include <algorithm>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "agent/meeting.h"
#include "agent/supervisor_impl.h"

namespace cxxrun::agent {

void Supervisor::start_watching() {
  auto* rdzv = meeting_.rendezvous();
  if (!meeting_.elastic() || !rdzv) return;
  watcher_ = meeting_.make_watcher([this](const std::string& key, const std::string& event) {
    asio::post(io_, [this, key, event] {
      // An event of a round this node already left is old news.
      if (auto* rdzv = meeting_.rendezvous(); rdzv && phase_ != Phase::rendezvous && key == rdzv->event_key())
        on_event(event);
    });
  });
  watcher_->watch(rdzv->event_key());
}

void Supervisor::publish(const Failure& f) {
  if (auto* rdzv = meeting_.rendezvous()) {
    try {
      rdzv->publish_failure(to_record(f, host_));
    } catch (const std::exception& e) {
      log_->warn("cannot tell the other nodes about the failure: {}", e.what());
    }
  }
}

void Supervisor::on_failure(const Failure& f) {
  publish(f);
  begin_stop(Reason::failure, SIGTERM);
}

void Supervisor::on_success() {
  log_->info("all {} workers succeeded", workers_.size());
  if (auto* rdzv = meeting_.rendezvous()) {
    try {
      if (std::string event = rdzv->finish_round(); !event.empty()) event_ = event;
    } catch (const std::exception& e) {
      log_->warn("cannot report success to the rendezvous store: {}", e.what());
    }
  }
  begin_stop(Reason::success, SIGTERM);
}

void Supervisor::on_event(const std::string& event) {
  event_ = event;
  if (phase_ == Phase::barrier) return after_event(event);
  if (phase_ != Phase::running) return;  // already stopping: the decision reads event_
  if (event == "abort") {
    log_->warn("a worker failed on another node; stopping this node's workers");
    begin_stop(Reason::remote, SIGTERM);
  } else if (event == "join") {
    log_->info("a node is waiting to join; restarting the job to take it in");
    begin_stop(Reason::membership, SIGTERM);
  } else if (event == "dead") {
    log_->warn("a node stopped sending keep-alives; restarting the job without it");
    begin_stop(Reason::membership, SIGTERM);
  }
}

// Our workers are stopped; `event` says what the rest of the job did.
void Supervisor::after_event(const std::string& event) {
  if (event == "done") return finish(0);
  if (event == "abort") return restart_or_fail();
  rejoin(0);
}

// Ticks four times per keep-alive interval: a beat on every fourth, a check
// for dead members on each, so a death is seen within the configured
// interval * max_attempt.
void Supervisor::schedule_keep_alive() {
  if (meeting_.keep_alive_interval().count() == 0) return;
  keep_alive_timer_.expires_after(meeting_.keep_alive_interval() / 4);
  keep_alive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ == Phase::done) return;
    // While a thread rejoins, the store connection is that thread's.
    if (phase_ != Phase::rendezvous) keep_alive_tick();
    schedule_keep_alive();
  });
}

void Supervisor::keep_alive_tick() {
  if (keep_alive_ticks_++ % 4 != 0) return check_members();
  const Meeting::Beat beat = meeting_.keep_alive();
  if (beat == Meeting::Beat::lost && phase_ == Phase::barrier) return finish(1);
  if (beat == Meeting::Beat::lost && phase_ == Phase::running) return begin_stop(Reason::lost, SIGTERM);
  if (beat == Meeting::Beat::ok) check_members();
}

void Supervisor::check_members() {
  auto* rdzv = meeting_.rendezvous();
  if (!rdzv || phase_ != Phase::running || meeting_.store_failing()) return;
  std::vector<int> dead;
  try {
    dead = rdzv->dead_members();
  } catch (const std::exception&) {
    return;  // keep_alive() already said the store is unreachable
  }
  if (dead.empty()) return;
  const auto& s = c_.rdzv.settings;
  const int alive = rdzv->members() - static_cast<int>(dead.size());
  std::string ranks;
  for (int r : dead) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  log_->warn("node rank {} sent no keep-alive for {} ms", ranks,
             (s.keep_alive_interval * s.keep_alive_max_attempt).count());
  dead_seen_ = static_cast<int>(dead.size());
  try {
    rdzv->publish_event("dead");
  } catch (const std::exception& e) {
    log_->warn("cannot tell the other nodes: {}", e.what());
  }
  if (alive < s.min_nodes) {
    log_->error("only {} nodes of job {} are alive, fewer than the minimum of {} (--nnodes={}:{}); stopping", alive,
                c_.run_id, s.min_nodes, s.min_nodes, s.max_nodes);
    begin_stop(Reason::lost, SIGTERM);
  }
}

void Supervisor::finish_attempt() {
  switch (reason_) {
    case Reason::signal:
      return finish(128 + agent_signal_);
    case Reason::lost:
      return finish(1);
    case Reason::success:
      if (!meeting_.elastic() || event_ == "done") return finish(0);
      if (!event_.empty()) return after_event(event_);
      log_->info("waiting for the other nodes to finish");
      phase_ = Phase::barrier;
      return;
    case Reason::failure:
    case Reason::remote:
      return restart_or_fail();
    case Reason::membership:
      return rejoin(0);
  }
}

void Supervisor::restart_or_fail() {
  if (attempt_ >= c_.max_restarts) return final_failure();
  ++attempt_;
  std::string what = failures_.empty() ? "" : describe(failures_[0]);
  if (reason_ == Reason::remote) what = "a worker failed on another node" + (what.empty() ? "" : "; here " + what);
  log_->warn("worker group failed ({}); restarting, attempt {} of {} restarts", what, attempt_, c_.max_restarts);
  EventDetails details;
  details.extra["reason"] = what;
  events_.context().restart_count = attempt_;
  events_.agent_event(AgentEvent::restart, details);
  if (meeting_.elastic()) return rejoin(0);
  try {
    meeting_.renew_worker_store();
  } catch (const std::exception& e) {
    log_->error("{}", e.what());
    return finish(1);
  }
  start_group();
}

// Re-forms the job in a new round on a thread, so signals are still handled;
// `expected` 0 means everyone who was in plus everyone waiting, minus the dead.
void Supervisor::rejoin(int expected) {
  auto* rdzv = meeting_.rendezvous();
  if (expected == 0 && rdzv) {
    int waiting = 0;
    try {
      waiting = rdzv->num_nodes_waiting();
    } catch (const std::exception&) {
    }
    const int dead = event_ == "dead" ? std::max(1, dead_seen_) : 0;
    expected = std::max(1, rdzv->members() - dead + waiting);
  }
  phase_ = Phase::rendezvous;
  log_->info("re-forming the job in a new rendezvous round (expecting {} nodes)", expected);
  if (rendezvous_thread_.joinable()) rendezvous_thread_.join();
  rendezvous_thread_ = std::thread([this, expected, next = c_]() mutable {
    std::string error;
    try {
      meeting_.rejoin(next, expected);
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "rendezvous failed";
    }
    asio::post(io_, [this, next, error] { on_rejoined(next, error); });
  });
}

void Supervisor::on_rejoined(const Config& next, const std::string& error) {
  rendezvous_thread_.join();
  if (!error.empty()) {
    log_->error("{}", error);
    return finish(1);
  }
  c_ = next;
  event_.clear();
  dead_seen_ = 0;
  log_ = spdlog::default_logger()->clone("cxxrun node" + std::to_string(c_.group_rank));
  if (watcher_) watcher_->watch(meeting_.rendezvous()->event_key());
  record_rendezvous();
  start_group();
}

// The summary lists every node's first failure (from the rendezvous store)
// and this node's own, on every node, root cause first.
void Supervisor::final_failure() {
  std::vector<Failure> shown;
  if (auto* rdzv = meeting_.rendezvous()) {
    try {
      // Bounded: a member that is dead, or whose workers ignore SIGTERM,
      // delays the summary by this much, not by the shutdown grace.
      rdzv->wait_all_stopped(std::chrono::seconds(3));
      for (const std::string& record : rdzv->failure_records())
        if (auto f = from_record(record)) shown.push_back(*f);
    } catch (const std::exception& e) {
      log_->warn("cannot read the job's failures from the rendezvous store: {}", e.what());
    }
  }
  const size_t published = shown.size();
  for (const Failure& f : failures_) {
    auto same = [&](const Failure& r) { return r.pid == f.pid && r.rank == f.rank && (r.host.empty() || r.host == host_); };
    if (std::none_of(shown.begin(), shown.begin() + published, same)) shown.push_back(f);
  }
  if (shown.empty()) {
    log_->error("the job failed on another node, and its failure record could not be read");
    return finish(1);
  }
  // The first record published is the failure seen first; one that was
  // still tearing down then may have happened earlier.
  order_by_time(shown);
  const std::string summary = format_summary(c_.entrypoint_name, host_, shown);
  (void)!write(STDERR_FILENO, summary.data(), summary.size());
  finish(job_exit_code(shown));
}

}  // namespace cxxrun::agent
