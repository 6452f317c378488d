#include "agent/straggler/detector.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

// MAD scaled to a normal distribution's standard deviation.
constexpr double kMadScale = 1.4826;
constexpr double kSpreads = 3;  // how many scaled MADs above the others' median

// The compute signal: the straggler computes at least half the window,
// 0.2 above the others' median and 1.3x it, while they wait 20 %.
constexpr double kComputeMin = 0.5;
constexpr double kComputeFloor = 0.2;
constexpr double kComputeRatio = 1.3;
constexpr double kPeersWait = 0.2;
// The step signal: 1.3x the others' median step, and 0.25 of it above.
constexpr double kStepRatio = 1.3;
constexpr double kStepFloor = 0.25;
// The GPU signal: a throttled SM clock 0.15 below the others' median.
constexpr double kClockFloor = 0.15;

double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  const std::size_t mid = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid), xs.end());
  const double upper = xs[mid];
  if (xs.size() % 2 == 1) return upper;
  return (*std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

// The others' median and scaled MAD.
struct Yardstick {
  double median = 0;
  double spread = 0;
};
Yardstick yardstick(const std::vector<double>& others) {
  const double m = median(others);
  std::vector<double> dev;
  dev.reserve(others.size());
  for (double x : others) dev.push_back(std::fabs(x - m));
  return {m, kSpreads * kMadScale * median(std::move(dev))};
}

std::optional<SlowPeer> slow_by_step(const PeerWindow& p, const std::vector<PeerWindow>& all) {
  if (!p.step_seconds) return std::nullopt;
  std::vector<double> others;
  for (const PeerWindow& q : all)
    if (q.id != p.id && q.step_seconds) others.push_back(*q.step_seconds);
  if (others.empty()) return std::nullopt;
  const Yardstick y = yardstick(others);
  const double v = *p.step_seconds;
  if (y.median <= 0 || v - y.median <= std::max(y.spread, kStepFloor * y.median) || v / y.median < kStepRatio)
    return std::nullopt;
  return SlowPeer{p.id, SlowSignal::step, v / y.median, v, y.median};
}

std::optional<SlowPeer> slow_by_compute(const PeerWindow& p, const std::vector<PeerWindow>& all) {
  std::vector<double> running, blocked;
  for (const PeerWindow& q : all) {
    if (q.id == p.id) continue;
    running.push_back(q.running);
    blocked.push_back(q.blocked);
  }
  if (running.empty() || p.running < kComputeMin || median(blocked) < kPeersWait) return std::nullopt;
  const Yardstick y = yardstick(running);
  const double ratio = p.running / std::max(y.median, 0.05);
  if (p.running - y.median <= std::max(y.spread, kComputeFloor) || ratio < kComputeRatio) return std::nullopt;
  return SlowPeer{p.id, SlowSignal::compute, ratio, p.running, y.median};
}

std::optional<SlowPeer> slow_by_gpu(const PeerWindow& p, const std::vector<PeerWindow>& all) {
  if (!p.gpu_clock || p.gpu_throttle.empty()) return std::nullopt;
  std::vector<double> others;
  for (const PeerWindow& q : all)
    if (q.id != p.id && q.gpu_clock) others.push_back(*q.gpu_clock);
  if (others.empty()) return std::nullopt;
  const Yardstick y = yardstick(others);
  if (y.median - *p.gpu_clock <= std::max(y.spread, kClockFloor)) return std::nullopt;
  return SlowPeer{p.id, SlowSignal::gpu, y.median / std::max(*p.gpu_clock, 0.01), *p.gpu_clock, y.median};
}

// Peer `id`'s mean share of one cause over `history` and the mean of the
// others' median, per window; nullopt where `id` has no reading.
struct Share {
  double own = 0;
  double others = 0;
  double seconds = 0;
};
std::optional<Share> share_of(int id, const std::deque<std::vector<PeerWindow>>& history,
                              const std::deque<double>& seconds,
                              const std::function<std::optional<double>(const PeerWindow&)>& read) {
  Share sum;
  int windows = 0;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const auto& window = history[i];
    std::optional<double> own;
    std::vector<double> others;
    for (const PeerWindow& p : window) {
      const auto v = read(p);
      if (!v) continue;
      if (p.id == id)
        own = v;
      else
        others.push_back(*v);
    }
    if (!own) continue;
    sum.own += *own;
    sum.others += median(std::move(others));
    sum.seconds += i < seconds.size() ? seconds[i] : 0;
    ++windows;
  }
  if (windows == 0) return std::nullopt;
  return Share{sum.own / windows, sum.others / windows, sum.seconds};
}

std::string percent(double share) { return fmt::format("{:.0f} %", std::clamp(share, 0.0, 1.0) * 100); }

}  // namespace

std::string_view signal_name(SlowSignal s) {
  switch (s) {
    case SlowSignal::step: return "step";
    case SlowSignal::compute: return "compute";
    case SlowSignal::gpu: break;
  }
  return "gpu-clock";
}

std::string_view cause_name(SlowCause::Kind k) {
  switch (k) {
    case SlowCause::Kind::cgroup_throttle: return "cgroup-throttle";
    case SlowCause::Kind::gpu_throttle: return "gpu-throttle";
    case SlowCause::Kind::steal: return "steal";
    case SlowCause::Kind::cpu_wait: return "cpu-wait";
    case SlowCause::Kind::psi_memory: return "memory-pressure";
    case SlowCause::Kind::psi_io: return "io-pressure";
    case SlowCause::Kind::psi_cpu: break;
  }
  return "cpu-pressure";
}

std::vector<SlowPeer> slow_peers(const std::vector<PeerWindow>& window) {
  std::vector<SlowPeer> out;
  if (window.size() < 2) return out;
  for (const PeerWindow& p : window) {
    if (auto s = slow_by_step(p, window))
      out.push_back(*s);
    else if (auto c = slow_by_compute(p, window))
      out.push_back(*c);
    else if (auto g = slow_by_gpu(p, window))
      out.push_back(*g);
  }
  return out;
}

std::vector<SlowCause> causes_of(int id, const std::deque<std::vector<PeerWindow>>& history,
                                 const std::deque<double>& seconds, bool nodes) {
  std::vector<SlowCause> out;
  // Its own share at least `floor`, and `floor` above the others'.
  auto apart = [&](SlowCause::Kind kind, double floor, const std::function<std::optional<double>(const PeerWindow&)>& read,
                   std::string detail = "") {
    const auto s = share_of(id, history, seconds, read);
    if (s && s->own >= floor && s->own - s->others >= floor)
      out.push_back(SlowCause{kind, s->own, std::move(detail), s->seconds});
  };
  std::string cgroup;
  const PeerWindow* gpu = nullptr;
  for (const auto& window : history)
    for (const PeerWindow& p : window) {
      if (p.id != id) continue;
      if (!p.cgroup.empty()) cgroup = p.cgroup;
      if (!p.gpu_throttle.empty()) gpu = &p;
    }
  apart(SlowCause::Kind::cgroup_throttle, 0.05, [](const PeerWindow& p) { return p.throttled; }, cgroup);
  if (gpu) out.push_back(SlowCause{SlowCause::Kind::gpu_throttle, gpu->gpu_clock.value_or(0), gpu->gpu_throttle, 0});
  if (nodes) apart(SlowCause::Kind::steal, 0.05, [](const PeerWindow& p) { return p.steal; });
  apart(SlowCause::Kind::cpu_wait, 0.10,
        [](const PeerWindow& p) { return std::optional<double>(std::max(0.0, p.run_delay - p.throttled.value_or(0))); });
  if (nodes) {
    apart(SlowCause::Kind::psi_memory, 0.10, [](const PeerWindow& p) { return p.psi_memory; });
    apart(SlowCause::Kind::psi_io, 0.10, [](const PeerWindow& p) { return p.psi_io; });
    apart(SlowCause::Kind::psi_cpu, 0.10, [](const PeerWindow& p) { return p.psi_cpu; });
  }
  return out;
}

std::string describe_causes(const std::vector<SlowCause>& causes) {
  if (causes.empty())
    return "no host cause found (no CPU throttling, GPU throttling, CPU wait, steal or pressure): it has more work "
           "or slower input than its peers";
  std::string out;
  for (const SlowCause& c : causes) {
    if (!out.empty()) out += "; ";
    const std::string last = fmt::format("the last {:.0f} s", c.seconds);
    switch (c.kind) {
      case SlowCause::Kind::cgroup_throttle:
        out += fmt::format("its cgroup{} was CPU-throttled for {} of {}", c.detail.empty() ? "" : " " + c.detail,
                           percent(c.share), last);
        break;
      case SlowCause::Kind::gpu_throttle:
        out += fmt::format("its GPU is throttled ({})", c.detail);
        if (c.share > 0) out += fmt::format(": SM clock at {} of its maximum", percent(c.share));
        break;
      case SlowCause::Kind::steal:
        out += fmt::format("its host lost {} of its CPU time to steal (the hypervisor ran others) over {}",
                           percent(c.share), last);
        break;
      case SlowCause::Kind::cpu_wait:
        out += fmt::format("it waited for a CPU for {} of {} (other processes compete for its cores)",
                           percent(c.share), last);
        break;
      case SlowCause::Kind::psi_memory:
        out += fmt::format("memory pressure stalled its tasks for {} of {}", percent(c.share), last);
        break;
      case SlowCause::Kind::psi_io:
        out += fmt::format("I/O pressure stalled its tasks for {} of {}", percent(c.share), last);
        break;
      case SlowCause::Kind::psi_cpu:
        out += fmt::format("CPU pressure stalled its tasks for {} of {}", percent(c.share), last);
        break;
    }
  }
  return out;
}

std::string describe_slowness(const StragglerVerdict& v, const std::string& peer) {
  switch (v.signal) {
    case SlowSignal::step:
      return fmt::format("takes {:.1f}x the median {}'s step time ({:.2f} s against {:.2f} s)", v.ratio, peer,
                         v.value, v.peers);
    case SlowSignal::compute:
      return fmt::format("computes {:.1f}x as long as the median {} between collectives", v.ratio, peer);
    case SlowSignal::gpu: break;
  }
  return fmt::format("runs its GPU {:.1f}x slower than the median {} (SM clock at {} of its maximum against {})",
                     v.ratio, peer, percent(v.value), percent(v.peers));
}

std::vector<StragglerVerdict> PeerJudge::window(const std::vector<PeerWindow>& peers, double seconds) {
  history_.push_back(peers);
  seconds_.push_back(seconds);
  while (history_.size() > kCauseWindows) {
    history_.pop_front();
    seconds_.pop_front();
  }
  std::map<int, SlowPeer> slow;
  for (const SlowPeer& s : slow_peers(peers)) slow[s.id] = s;
  std::set<int> present;
  for (const PeerWindow& p : peers) present.insert(p.id);
  for (auto it = streaks_.begin(); it != streaks_.end();)
    it = present.count(it->first) || named_.count(it->first) ? std::next(it) : streaks_.erase(it);

  std::vector<StragglerVerdict> out;
  for (int id : present) {
    Streak& s = streaks_[id];
    auto found = slow.find(id);
    s.recent.push_back(found != slow.end());
    while (s.recent.size() > static_cast<std::size_t>(kNameWithin)) s.recent.pop_front();
    if (found == slow.end()) {
      ++s.normal;
      auto named = named_.find(id);
      if (named != named_.end() && s.normal >= kClearAfter) {
        StragglerVerdict cleared = named->second;
        cleared.named = false;
        out.push_back(cleared);
        named_.erase(named);
      }
      continue;
    }
    const SlowPeer& p = found->second;
    s.normal = 0;
    s.ratios.push_back(p.ratio);
    while (s.ratios.size() > static_cast<std::size_t>(kNameAfter)) s.ratios.pop_front();
    StragglerVerdict v;
    v.id = id;
    v.signal = p.signal;
    double sum = 0;
    for (double r : s.ratios) sum += r;
    v.ratio = sum / static_cast<double>(s.ratios.size());
    v.value = p.value;
    v.peers = p.peers;
    auto named = named_.find(id);
    if (named != named_.end()) {
      v.causes = named->second.causes;  // as it was named; the line is not said again
      named->second = v;
    } else if (std::count(s.recent.begin(), s.recent.end(), true) >= kNameAfter) {
      v.causes = causes_of(id, history_, seconds_, nodes_);
      named_[id] = v;
      out.push_back(v);
    }
  }
  return out;
}

void PeerJudge::reset() {
  history_.clear();
  seconds_.clear();
  streaks_.clear();
  named_.clear();
}

}  // namespace cxxrun::agent
