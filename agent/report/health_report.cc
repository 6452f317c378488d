#include "agent/report/health_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>

namespace cxxrun::agent {
namespace {

// Label values may hold anything a user put in --rdzv-id or --role; the
// format allows only these three escapes.
std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// Go's float syntax, which Prometheus parses: shortest round-trip digits,
// and NaN / +Inf / -Inf spelled its way.
std::string sample_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // `labels` is already rendered: `a="1",b="2"`, or empty.
  void sample(std::string_view labels, double value) {
    if (labels.empty())
      fmt::format_to(std::back_inserter(out_), "{} {}\n", name_, sample_value(value));
    else
      fmt::format_to(std::back_inserter(out_), "{}{{{}}} {}\n", name_, labels, sample_value(value));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

std::string worker_labels(const WorkerHealth& w) {
  return fmt::format("local_rank=\"{}\",rank=\"{}\"", w.local_rank, w.rank);
}

}  // namespace

bool reports_healthy(const HealthSnapshot& s) {
  if (!s.node_healthy) return false;
  return s.state != GroupState::unknown && s.state != GroupState::unhealthy && s.state != GroupState::failed;
}

std::string health_json(const HealthSnapshot& s) {
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const WorkerHealth& w : s.workers) {
    nlohmann::ordered_json heartbeat = nullptr;
    if (w.seconds_since_heartbeat && std::isfinite(*w.seconds_since_heartbeat)) heartbeat = *w.seconds_since_heartbeat;
    workers.push_back({{"local_rank", w.local_rank},
                       {"rank", w.rank},
                       {"pid", w.pid},
                       {"state", worker_run_state_name(w.state)},
                       {"seconds_since_heartbeat", heartbeat},
                       {"cause", w.cause.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.cause)},
                       {"cause_detail",
                        w.cause.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w.cause_detail)}});
  }
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const CheckHealth& c : s.checks)
    checks.push_back({{"name", c.name}, {"healthy", c.healthy}, {"detail", c.detail}, {"seconds", c.seconds}});
  nlohmann::ordered_json body = {{"state", group_state_name(s.state)},
                                 {"run_id", s.run_id},
                                 {"role", s.role},
                                 {"group_rank", s.group_rank},
                                 {"group_world_size", s.group_world_size},
                                 {"restart_count", s.restart_count},
                                 {"max_restarts", s.max_restarts},
                                 {"rendezvous_reachable", !s.rendezvous_unreachable_seconds},
                                 {"rendezvous_unreachable_seconds", nullptr},
                                 {"node_healthy", s.node_healthy},
                                 {"last_hang", nullptr},
                                 {"checks", std::move(checks)},
                                 {"workers", std::move(workers)}};
  if (s.rendezvous_unreachable_seconds) body["rendezvous_unreachable_seconds"] = *s.rendezvous_unreachable_seconds;
  if (s.last_hang)
    body["last_hang"] = {{"what", s.last_hang->what},     {"picture", s.last_hang->picture},
                         {"stacks", s.last_hang->bundle}, {"rank", s.last_hang->rank},
                         {"stack", s.last_hang->stack}};
  // Invalid UTF-8 in a user-given run id must not turn a probe into a 500.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string prometheus_text(const HealthSnapshot& s) {
  Exposition m;
  m.family("cxxrun_agent_info", "gauge", "Always 1; the labels name the job and node this agent serves.");
  m.sample(fmt::format("run_id=\"{}\",role=\"{}\",group_rank=\"{}\"", escape_label(s.run_id), escape_label(s.role),
                       s.group_rank),
           1);

  m.family("cxxrun_agent_state", "gauge", "1 for the worker group's current state (torchrun's WorkerState), else 0.");
  for (GroupState state : kAllGroupStates)
    m.sample(fmt::format("state=\"{}\"", group_state_name(state)), state == s.state ? 1 : 0);

  m.family("cxxrun_group_rank", "gauge", "This node's rank among the nodes of the current rendezvous round.");
  m.sample("", s.group_rank);
  m.family("cxxrun_group_world_size", "gauge", "Nodes in the current rendezvous round.");
  m.sample("", s.group_world_size);

  m.family("cxxrun_restart_count", "gauge", "Worker group restarts made so far (TORCHELASTIC_RESTART_COUNT).");
  m.sample("", s.restart_count);
  m.family("cxxrun_max_restarts", "gauge", "Worker group restarts allowed (--max-restarts).");
  m.sample("", s.max_restarts);
  m.family("cxxrun_remaining_restarts", "gauge", "Worker group restarts still allowed.");
  m.sample("", std::max(0, s.max_restarts - s.restart_count));
  m.family("cxxrun_rendezvous_reachable", "gauge",
           "0 while the rendezvous store is unreachable and the workers go on (etcd without quorum), else 1.");
  m.sample("", s.rendezvous_unreachable_seconds ? 0 : 1);

  const auto running = std::count_if(s.workers.begin(), s.workers.end(),
                                     [](const WorkerHealth& w) { return w.state == WorkerRunState::running; });
  m.family("cxxrun_workers_running", "gauge", "Worker processes of this node that are alive.");
  m.sample("", static_cast<double>(running));

  m.family("cxxrun_worker_running", "gauge", "1 while the worker's process is alive, else 0.");
  for (const WorkerHealth& w : s.workers) m.sample(worker_labels(w), w.state == WorkerRunState::running ? 1 : 0);

  m.family("cxxrun_node_healthy", "gauge", "0 once a worker outlived SIGKILL (unkillable): the node needs an admin.");
  m.sample("", s.node_healthy ? 1 : 0);

  m.family("cxxrun_health_check_ok", "gauge",
           "1 if the health check passed before the last round, 0 if it failed (--health-check, --health-path, "
           "rdma, gpu, gpu memory).");
  for (const CheckHealth& c : s.checks) m.sample(fmt::format("check=\"{}\"", escape_label(c.name)), c.healthy ? 1 : 0);
  m.family("cxxrun_health_check_seconds", "gauge", "How long the health check took before the last round.");
  for (const CheckHealth& c : s.checks) m.sample(fmt::format("check=\"{}\"", escape_label(c.name)), c.seconds);

  m.family("cxxrun_worker_failures_total", "counter",
           "Worker failures since the agent started, by cause (oom-killed, crashed, killed-by-cxxrun, ...).");
  for (const auto& [cause, n] : s.failures_by_cause) m.sample(fmt::format("cause=\"{}\"", cause), n);

  // A gauge, not a counter: a failure moves its unsaved work from productive
  // to lost, so one series steps down, which a counter must never do.
  m.family("cxxrun_phase_seconds", "gauge",
           "Seconds of this node's wall time since the agent started, by goodput phase (rendezvous, startup, "
           "productive, lost, hang_detection, teardown, waiting); the running attempt counts provisionally, and a "
           "failure moves its work since the last checkpoint from productive to lost.");
  for (const auto& [phase, seconds] : s.phase_seconds) m.sample(fmt::format("phase=\"{}\"", phase), seconds);
  m.family("cxxrun_goodput_ratio", "gauge", "Productive seconds over wall seconds since the agent started.");
  if (s.goodput_ratio) m.sample("", *s.goodput_ratio);

  m.family("cxxrun_worker_seconds_since_heartbeat", "gauge",
           "Seconds since the worker's last heartbeat; absent while it has none.");
  for (const WorkerHealth& w : s.workers)
    if (w.seconds_since_heartbeat) m.sample(worker_labels(w), *w.seconds_since_heartbeat);

  auto rank_labels = [](const RankSpeed& r) { return fmt::format("local_rank=\"{}\",rank=\"{}\"", r.local_rank, r.rank); };
  m.family("cxxrun_rank_running_share", "gauge",
           "Share of the last straggler window (5 s) the rank's main thread computed (running or runnable).");
  for (const RankSpeed& r : s.speeds.ranks) m.sample(rank_labels(r), r.running_share);
  m.family("cxxrun_rank_step_seconds", "gauge", "The rank's seconds per step in the last straggler window; absent "
           "while it reports no steps.");
  for (const RankSpeed& r : s.speeds.ranks)
    if (r.step_seconds) m.sample(rank_labels(r), *r.step_seconds);
  m.family("cxxrun_rank_straggler", "gauge", "1 while the rank is named slower than the other ranks of its node.");
  for (const RankSpeed& r : s.speeds.ranks) m.sample(rank_labels(r), r.straggler ? 1 : 0);
  m.family("cxxrun_node_straggler", "gauge", "1 while the job names this node slower than the other nodes.");
  m.sample("", s.speeds.node_straggler ? 1 : 0);
  return m.take();
}

}  // namespace cxxrun::agent
