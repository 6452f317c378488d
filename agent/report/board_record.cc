#include "agent/report/board_record.h"

#include <nlohmann/json.hpp>

namespace cxxrun::agent {
namespace {

using nlohmann::json;

std::string cut(const std::string& text) {
  if (text.size() <= kMaxBoardText) return text;
  // Never split a UTF-8 sequence: back up to a lead byte.
  size_t n = kMaxBoardText - 3;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n) + "...";
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json rank_of(const WorkerHealth& w, const SpeedView& speeds) {
  json r = {{"rank", w.rank},
            {"local_rank", w.local_rank},
            {"pid", w.pid},
            {"state", std::string(worker_run_state_name(w.state))},
            {"heartbeat_age_s", optional_number(w.seconds_since_heartbeat)}};
  if (!w.cause.empty()) r["cause"] = cut(w.cause + (w.cause_detail.empty() ? "" : ": " + w.cause_detail));
  // The straggler watch's last window of this rank (agent/straggler/), when sampled.
  for (const RankSpeed& s : speeds.ranks)
    if (s.rank == w.rank) {
      r["straggler"] = s.straggler;
      r["running_share"] = s.running_share;
      if (s.step_seconds) r["step_s"] = *s.step_seconds;
    }
  return r;
}

}  // namespace

std::string board_record(const BoardFacts& f, const HealthSnapshot& s, size_t limit) {
  json doc = {{"v", 1},
              {"node", f.node},
              {"host", f.host},
              {"pid", f.agent_pid},
              {"group_rank", s.group_rank},
              {"group_world_size", s.group_world_size},
              {"round", f.round},
              {"phase", f.phase},
              {"state", std::string(group_state_name(s.state))},
              {"attempt", f.attempt},
              {"restarts", s.restart_count},
              {"max_restarts", s.max_restarts},
              {"node_healthy", s.node_healthy},
              {"straggler", s.speeds.node_straggler},
              {"step", f.step ? json(*f.step) : json(nullptr)},
              {"progress_age_s", optional_number(f.seconds_since_progress)},
              {"updated_ms", f.updated_ms}};
  for (const CheckHealth& c : s.checks)
    if (!c.healthy) {
      doc["health"] = cut(c.name + ": " + c.detail);
      break;
    }
  if (s.last_hang) doc["hang"] = cut(s.last_hang->what);
  json ranks = json::array();
  for (const WorkerHealth& w : s.workers) ranks.push_back(rank_of(w, s.speeds));
  doc["ranks"] = ranks;
  std::string out = doc.dump();
  // Ranks go from the end until it fits; each try drops a share of what is
  // over, so a node with thousands of ranks takes a few dumps, not one per rank.
  size_t left_out = 0;
  while (out.size() > limit && !doc["ranks"].empty()) {
    auto& r = doc["ranks"];
    const size_t per_rank = std::max<size_t>(1, out.size() / (r.size() + 4));
    size_t drop = std::min(r.size(), std::max<size_t>(1, (out.size() - limit) / per_rank));
    r.erase(r.end() - static_cast<std::ptrdiff_t>(drop), r.end());
    left_out += drop;
    doc["ranks_left_out"] = left_out;
    out = doc.dump();
  }
  if (out.size() > limit) {
    // Only the node's own words can still be too long: keep who it is.
    json small = {{"v", 1}, {"node", cut(f.node)}, {"updated_ms", f.updated_ms}, {"ranks", json::array()},
                  {"ranks_left_out", s.workers.size()}};
    out = small.dump();
  }
  return out;
}

}  // namespace cxxrun::agent
