#include "agent/straggler/node_summary.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

double median_of(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const std::size_t mid = xs.size() / 2;
  return xs.size() % 2 == 1 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

// A field's text without the separator or control characters, cut.
std::string clean(std::string_view text, std::size_t limit) {
  std::string out;
  for (char c : text) {
    if (out.size() >= limit) break;
    if (c != '|' && !std::iscntrl(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

std::string number(std::optional<double> v) { return v ? fmt::format("{:.3g}", *v) : ""; }

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t bar = line.find('|', start);
    out.push_back(line.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

template <typename T>
bool parse(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// An empty field is unknown; anything else must be a number.
bool parse_optional(std::string_view text, std::optional<double>& out) {
  if (text.empty()) return true;
  double v = 0;
  if (!parse(text, v)) return false;
  out = v;
  return true;
}

}  // namespace

PeerWindow rank_peer(const RankWindow& r, std::optional<double> step_seconds, const HostWindow& host) {
  PeerWindow p;
  p.id = r.rank;
  p.running = r.running_share;
  p.blocked = r.blocked_share;
  p.step_seconds = step_seconds;
  p.gpu_clock = r.gpu_clock_ratio;
  p.gpu_throttle = r.gpu_throttle;
  p.throttled = r.throttled_share;
  p.cgroup = r.throttled_cgroup;
  p.run_delay = r.run_delay_share;
  p.steal = host.steal_share;
  // Pressure comes in % of the window.
  auto share = [](std::optional<double> pct) { return pct ? std::optional<double>(*pct / 100) : std::nullopt; };
  p.psi_cpu = share(host.psi_cpu_some);
  p.psi_memory = share(host.psi_memory_some);
  p.psi_io = share(host.psi_io_some);
  return p;
}

PeerWindow node_peer(const std::vector<PeerWindow>& ranks) {
  PeerWindow n;
  if (ranks.empty()) return n;
  std::vector<double> running, blocked, steps, waits;
  for (const PeerWindow& r : ranks) {
    running.push_back(r.running);
    blocked.push_back(r.blocked);
    waits.push_back(r.run_delay);
    if (r.step_seconds) steps.push_back(*r.step_seconds);
    if (r.gpu_clock && (!n.gpu_clock || *r.gpu_clock < *n.gpu_clock)) {
      n.gpu_clock = r.gpu_clock;
      n.gpu_throttle = r.gpu_throttle;
    }
    if (r.throttled && (!n.throttled || *r.throttled > *n.throttled)) {
      n.throttled = r.throttled;
      n.cgroup = r.cgroup;
    }
  }
  n.running = median_of(running);
  n.blocked = median_of(blocked);
  n.run_delay = median_of(waits);
  if (!steps.empty()) n.step_seconds = median_of(steps);
  n.steal = ranks[0].steal;
  n.psi_cpu = ranks[0].psi_cpu;
  n.psi_memory = ranks[0].psi_memory;
  n.psi_io = ranks[0].psi_io;
  return n;
}

std::string encode(const NodeSummary& s) {
  const PeerWindow& w = s.window;
  return fmt::format("1|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", s.seq, clean(s.host, 64), s.first_rank, s.ranks,
                     number(w.running), number(w.blocked), number(w.step_seconds), number(w.throttled),
                     number(w.gpu_clock), clean(w.gpu_throttle, 32), number(w.run_delay), number(w.steal),
                     number(w.psi_cpu), number(w.psi_memory), number(w.psi_io));
}

std::optional<NodeSummary> decode(std::string_view line, int group_rank) {
  const auto f = split(line);
  if (f.size() != 16 || f[0] != "1") return std::nullopt;
  NodeSummary s;
  PeerWindow& w = s.window;
  w.id = group_rank;
  s.host = std::string(f[2]);
  std::optional<double> running, blocked, wait;
  if (!parse(f[1], s.seq) || !parse(f[3], s.first_rank) || !parse(f[4], s.ranks) || !parse_optional(f[5], running) ||
      !parse_optional(f[6], blocked) || !parse_optional(f[7], w.step_seconds) || !parse_optional(f[8], w.throttled) ||
      !parse_optional(f[9], w.gpu_clock) || !parse_optional(f[11], wait) || !parse_optional(f[12], w.steal) ||
      !parse_optional(f[13], w.psi_cpu) || !parse_optional(f[14], w.psi_memory) || !parse_optional(f[15], w.psi_io))
    return std::nullopt;
  if (!running || !blocked) return std::nullopt;
  w.running = *running;
  w.blocked = *blocked;
  w.run_delay = wait.value_or(0);
  w.gpu_throttle = std::string(f[10]);
  return s;
}

std::string encode(const NodeVerdict& v) { return (v.host_cause ? "h|" : "-|") + clean(v.line, 1000); }

std::optional<NodeVerdict> decode_verdict(std::string_view text) {
  if (text.size() < 2 || text[1] != '|' || (text[0] != 'h' && text[0] != '-')) return std::nullopt;
  return NodeVerdict{std::string(text.substr(2)), text[0] == 'h'};
}

}  // namespace cxxrun::agent
