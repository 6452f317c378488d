#include "ctl/board_view.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace cxxrun::ctl {
namespace {

using nlohmann::json;

template <typename T>
T field(const json& j, const char* name, T fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

template <typename T>
std::optional<T> maybe(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<T>();
}

std::string age(const std::optional<double>& s) { return s ? fmt::format("{:.1f}s", *s) : "-"; }

// " straggler=no (running 93%)", " straggler=YES (...)", "" when not sampled.
std::string straggler_word(const RankRow& r) {
  if (!r.straggler) return "";
  return fmt::format(" straggler={}{}", *r.straggler ? "YES" : "no",
                     r.running_share ? fmt::format(" (running {:.0f}%)", *r.running_share * 100) : "");
}

double record_age(const NodeRow& n, long long now_ms) {
  return n.updated_ms > 0 ? std::max(0.0, static_cast<double>(now_ms - n.updated_ms) / 1000.0) : 0.0;
}

std::string node_state(const NodeRow& n, long long now_ms) {
  const double a = record_age(n, now_ms);
  return a > kStaleSeconds ? fmt::format("STALE (no update for {:.0f}s)", a) : n.state;
}

}  // namespace

std::vector<NodeRow> rows_of(const std::vector<std::pair<std::string, std::string>>& records) {
  std::vector<NodeRow> out;
  for (const auto& [node, record] : records) {
    NodeRow n;
    n.node = node;
    n.record = record;
    json j = json::parse(record, nullptr, false);
    if (j.is_discarded() || !j.is_object() || field<int>(j, "v", 0) != 1) {
      n.readable = false;
      out.push_back(std::move(n));
      continue;
    }
    n.host = field<std::string>(j, "host", "");
    n.pid = field<long>(j, "pid", 0);
    n.group_rank = field<int>(j, "group_rank", -1);
    n.round = field<int>(j, "round", 0);
    n.phase = field<std::string>(j, "phase", "");
    n.state = field<std::string>(j, "state", "");
    n.attempt = field<int>(j, "attempt", 0);
    n.restarts = field<int>(j, "restarts", 0);
    n.max_restarts = field<int>(j, "max_restarts", 0);
    n.node_healthy = field<bool>(j, "node_healthy", true);
    n.straggler = field<bool>(j, "straggler", false);
    n.health = field<std::string>(j, "health", "");
    n.hang = field<std::string>(j, "hang", "");
    n.step = maybe<long long>(j, "step");
    n.progress_age_s = maybe<double>(j, "progress_age_s");
    n.updated_ms = field<long long>(j, "updated_ms", 0);
    n.ranks_left_out = field<int>(j, "ranks_left_out", 0);
    if (auto r = j.find("ranks"); r != j.end() && r->is_array())
      for (const json& w : *r) {
        if (!w.is_object()) continue;
        RankRow row;
        row.rank = field<int>(w, "rank", -1);
        row.local_rank = field<int>(w, "local_rank", -1);
        row.pid = field<long>(w, "pid", 0);
        row.state = field<std::string>(w, "state", "");
        row.heartbeat_age_s = maybe<double>(w, "heartbeat_age_s");
        row.cause = field<std::string>(w, "cause", "");
        if (auto s = w.find("straggler"); s != w.end() && s->is_boolean()) row.straggler = s->get<bool>();
        row.running_share = maybe<double>(w, "running_share");
        n.ranks.push_back(std::move(row));
      }
    out.push_back(std::move(n));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const NodeRow& a, const NodeRow& b) { return a.group_rank < b.group_rank; });
  return out;
}

std::string status_text(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms) {
  size_t ranks = 0;
  for (const NodeRow& n : nodes) ranks += n.ranks.size() + static_cast<size_t>(n.ranks_left_out);
  std::string out = fmt::format("job {}: {} node{}, {} rank{}\n", run_id, nodes.size(), nodes.size() == 1 ? "" : "s",
                                ranks, ranks == 1 ? "" : "s");
  for (const NodeRow& n : nodes) {
    if (!n.readable) {
      out += fmt::format("node {}: its record is not one cxxrunctl reads ({} bytes)\n", n.node, n.record.size());
      continue;
    }
    out += fmt::format(
        "node {} host={} agent={} {} {} round={} attempt={} restarts={}/{} step={} progress={} health={}{}{} "
        "updated={:.1f}s ago\n",
        n.group_rank, n.host, n.pid, n.phase, node_state(n, now_ms), n.round, n.attempt, n.restarts, n.max_restarts,
        n.step ? std::to_string(*n.step) : "-", age(n.progress_age_s),
        n.node_healthy ? (n.health.empty() ? "ok" : "failed: " + n.health) : "unkillable worker",
        n.hang.empty() ? "" : " hang=\"" + n.hang + "\"", n.straggler ? " STRAGGLER" : "", record_age(n, now_ms));
    for (const RankRow& r : n.ranks)
      out += fmt::format("  rank {} local={} pid={} {} heartbeat={}{}{}\n", r.rank, r.local_rank, r.pid, r.state,
                         age(r.heartbeat_age_s), straggler_word(r),
                         r.cause.empty() ? "" : " cause=\"" + r.cause + "\"");
    if (n.ranks_left_out > 0) out += fmt::format("  ({} more ranks left out of the record)\n", n.ranks_left_out);
  }
  return out;
}

std::string status_json(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms) {
  // Each record goes out as the agent wrote it, its age spliced in: parsing
  // and dumping 10,000 records again would triple the time (bench/RESULTS.md).
  std::string out = "{\"run_id\":" + json(run_id).dump() + ",\"read_ms\":" + std::to_string(now_ms) + ",\"nodes\":[";
  bool first = true;
  for (const NodeRow& n : nodes) {
    out += first ? "" : ",";
    first = false;
    if (n.readable && n.record.size() > 2 && n.record.front() == '{')
      out += fmt::format("{{\"updated_age_s\":{:.3f},", record_age(n, now_ms)) + n.record.substr(1);
    else
      out += json{{"node", n.node}, {"unreadable", n.record.size()}}.dump();
  }
  return out + "]}\n";
}

std::string top_frame(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms,
                      size_t max_lines) {
  struct Line {
    double stale;
    const NodeRow* node;
    const RankRow* rank;
  };
  std::vector<Line> lines;
  size_t running = 0;
  for (const NodeRow& n : nodes)
    for (const RankRow& r : n.ranks) {
      double stale = record_age(n, now_ms);
      if (r.heartbeat_age_s) stale = std::max(stale, *r.heartbeat_age_s);
      if (n.progress_age_s) stale = std::max(stale, *n.progress_age_s);
      lines.push_back({stale, &n, &r});
      running += r.state == "running";
    }
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.stale > b.stale; });
  std::string out = fmt::format("cxxrunctl top: job {}, {} nodes, {} ranks, {} running\n", run_id, nodes.size(),
                                lines.size(), running);
  out += fmt::format("{:>6} {:>5} {:<20} {:>8} {:<10} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9} {}\n", "RANK", "NODE",
                     "HOST", "PID", "STATE", "ATTEMPT", "RESTARTS", "HEARTBEAT", "PROGRESS", "STALE", "STRAGGLER",
                     "CAUSE");
  for (size_t i = 0; i < lines.size() && i < max_lines; ++i) {
    const Line& l = lines[i];
    out += fmt::format("{:>6} {:>5} {:<20} {:>8} {:<10} {:>7} {:>8} {:>9} {:>9} {:>6.1f}s {:>9} {}\n", l.rank->rank,
                       l.node->group_rank, l.node->host.substr(0, 20), l.rank->pid, l.rank->state, l.node->attempt,
                       fmt::format("{}/{}", l.node->restarts, l.node->max_restarts), age(l.rank->heartbeat_age_s),
                       age(l.node->progress_age_s), l.stale,
                       !l.rank->straggler ? "-" : *l.rank->straggler ? "YES" : "no",
                       record_age(*l.node, now_ms) > kStaleSeconds ? "node not updating" : l.rank->cause);
  }
  if (lines.size() > max_lines) out += fmt::format("({} more ranks)\n", lines.size() - max_lines);
  return out;
}

}  // namespace cxxrun::ctl
