#include "agent/straggler/signals.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "agent/straggler/cpu_throttling.h"
#include "agent/straggler/host_pressure.h"
#include "agent/straggler/task_stat.h"

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The counters read at a window's edge, compared with the next edge's.
struct RankEdge {
  unsigned long long cpu_ticks = 0;
  std::optional<SchedStat> sched;
  std::vector<std::pair<std::string, CpuThrottle>> cgroups;  // nearest first
};

struct HostEdge {
  std::optional<CpuTimes> cpu;
  PressureTotals pressure;
};

// The deepest directory both paths are in ("" when none but the root).
std::string common_dir(const std::string& a, const std::string& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i <= std::min(a.size(), b.size()); ++i) {
    const bool end_a = i == a.size() || a[i] == '/', end_b = i == b.size() || b[i] == '/';
    if (end_a && end_b) n = i;
    if (i == a.size() || i == b.size() || a[i] != b[i]) break;
  }
  return a.substr(0, n);
}

}  // namespace

struct SpeedSampler::State {
  struct Rank {
    Target target;
    std::string gpu;
    bool gone = false;
    unsigned long long start_ticks = 0;  // the process's start time: a reused pid differs
    TaskStat last;                       // this tick's reading
    RankEdge edge;                       // at the window's start
    std::string v2;                      // its cgroup2 directory, for the job's pressure
    // The window so far.
    int samples = 0, running = 0, blocked = 0;
    std::map<std::string, int> wchans;
    double gpu_ratio_sum = 0;
    int gpu_ratio_n = 0;
    unsigned long long gpu_reasons = 0;
    bool gpu_reasons_known = false;
    Clock::time_point gpu_last_at{};
  };

  std::chrono::milliseconds window;
  std::shared_ptr<GpuClocks> gpus;
  RankGpus rank_gpus;
  CpuCgroups cgroups = CpuCgroups::detect();
  long ticks_per_second = sysconf(_SC_CLK_TCK);

  std::vector<Target> targets;
  std::vector<Rank> ranks;
  bool started = false;
  Clock::time_point window_start{}, last_slow{};
  HostEdge host_edge;

  // Reads each live rank's counters for a window edge, and the host's.
  void read_edge() {
    std::map<std::string, std::optional<CpuThrottle>> seen;  // a cgroup shared by ranks is read once
    for (Rank& r : ranks) {
      if (r.gone) continue;
      r.edge.cpu_ticks = r.last.cpu_ticks;
      r.edge.sched = read_schedstat(r.target.pid);
      r.edge.cgroups.clear();
      const auto of = cgroups.of(r.target.pid);
      if (!of) {
        r.gone = true;
        continue;
      }
      r.v2 = of->v2;
      for (const std::string& dir : of->cpu) {
        auto it = seen.find(dir);
        if (it == seen.end()) it = seen.emplace(dir, CpuCgroups::read(dir)).first;
        if (it->second) r.edge.cgroups.emplace_back(dir, *it->second);
      }
    }
    host_edge.cpu = read_cpu_times();
    host_edge.pressure = read_pressure(job_v2());
  }

  // The ranks' common cgroup2 directory below the mount: the job's (or the
  // attempt's), whose pressure is theirs. "" when they share only the root.
  std::string job_v2() const {
    std::optional<std::string> common;
    for (const Rank& r : ranks) {
      if (r.gone || r.v2.empty()) continue;
      common = common ? common_dir(*common, r.v2) : r.v2;
    }
    if (!common || common->size() <= cgroups.v2_mount().size()) return "";
    return *common;
  }

  // Samples each live rank's main thread; drops those that are gone.
  void sample(Clock::time_point now) {
    const bool slow = now - last_slow >= kSlowEvery;
    if (slow) last_slow = now;
    for (Rank& r : ranks) {
      if (r.gone) continue;
      const auto stat = read_task_stat(r.target.pid);
      if (!stat || is_gone(stat->state) || (r.start_ticks != 0 && stat->start_ticks != r.start_ticks)) {
        r.gone = true;
        continue;
      }
      r.start_ticks = stat->start_ticks;
      r.last = *stat;
      ++r.samples;
      if (stat->state == 'R') ++r.running;
      if (is_blocked(stat->state)) {
        ++r.blocked;
        if (slow)
          if (std::string w = read_wchan(r.target.pid); !w.empty()) ++r.wchans[w];
      }
      if (slow && gpus && !r.gpu.empty()) take_gpu(r, now);
    }
  }

  void take_gpu(Rank& r, Clock::time_point now) {
    const auto g = gpus->latest(r.gpu);
    // A reading is used once, and only while fresh: a driver that stopped
    // answering leaves an old one behind.
    if (!g || g->at == r.gpu_last_at || now - g->at > 3 * kSlowEvery) return;
    r.gpu_last_at = g->at;
    if (g->max_sm_mhz > 0) {
      r.gpu_ratio_sum += static_cast<double>(g->sm_mhz) / g->max_sm_mhz;
      ++r.gpu_ratio_n;
    }
    if (g->reasons) {
      r.gpu_reasons |= *g->reasons;
      r.gpu_reasons_known = true;
    }
  }

  // The window from the edge before to now; the edge now read becomes the next one's start.
  Window finish(Clock::time_point now) {
    Window w;
    const double secs = seconds_of(now - window_start);
    w.host.seconds = secs;
    std::vector<RankEdge> before;
    before.reserve(ranks.size());
    for (const Rank& r : ranks) before.push_back(r.edge);
    const HostEdge host_before = host_edge;
    read_edge();

    for (std::size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (r.gone || r.samples == 0 || secs <= 0) continue;
      RankWindow out;
      out.rank = r.target.rank;
      out.local_rank = r.target.local_rank;
      out.pid = r.target.pid;
      out.seconds = secs;
      out.samples = r.samples;
      out.running_share = static_cast<double>(r.running) / r.samples;
      out.blocked_share = static_cast<double>(r.blocked) / r.samples;
      if (r.edge.cpu_ticks >= before[i].cpu_ticks && ticks_per_second > 0)
        out.cpu_share = static_cast<double>(r.edge.cpu_ticks - before[i].cpu_ticks) / ticks_per_second / secs;
      if (r.edge.sched && before[i].sched && r.edge.sched->run_delay_ns >= before[i].sched->run_delay_ns)
        out.run_delay_share = (r.edge.sched->run_delay_ns - before[i].sched->run_delay_ns) / 1e9 / secs;
      const auto most = std::max_element(r.wchans.begin(), r.wchans.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
      if (most != r.wchans.end()) out.wait_channel = most->first;
      throttling(before[i], r.edge, secs, out);
      out.gpu = r.gpu;
      if (r.gpu_ratio_n > 0) out.gpu_clock_ratio = r.gpu_ratio_sum / r.gpu_ratio_n;
      if (r.gpu_reasons_known) out.gpu_throttle = clock_reason_words(r.gpu_reasons);
      w.ranks.push_back(std::move(out));
    }
    host(host_before, host_edge, secs, w.host);

    for (Rank& r : ranks) {
      r.samples = r.running = r.blocked = 0;
      r.wchans.clear();
      r.gpu_ratio_sum = 0;
      r.gpu_ratio_n = 0;
      r.gpu_reasons = 0;
      r.gpu_reasons_known = false;
    }
    window_start = now;
    return w;
  }

  // The cgroup that held the rank back most: the largest throttled time
  // among those read at both edges; the nearest when none did.
  static void throttling(const RankEdge& a, const RankEdge& b, double secs, RankWindow& out) {
    for (const auto& [dir, end] : b.cgroups) {
      const auto start = std::find_if(a.cgroups.begin(), a.cgroups.end(), [&](const auto& c) { return c.first == dir; });
      if (start == a.cgroups.end() || end.throttled_ns < start->second.throttled_ns) continue;
      const double share = (end.throttled_ns - start->second.throttled_ns) / 1e9 / secs;
      if (!out.throttled_share || share > *out.throttled_share) {
        out.throttled_share = share;
        out.throttled_cgroup = dir;
        out.nr_throttled = end.nr_throttled >= start->second.nr_throttled
                               ? end.nr_throttled - start->second.nr_throttled : 0;
      }
    }
  }

  static void host(const HostEdge& a, const HostEdge& b, double secs, HostWindow& out) {
    if (a.cpu && b.cpu && b.cpu->total > a.cpu->total && b.cpu->steal >= a.cpu->steal)
      out.steal_share = static_cast<double>(b.cpu->steal - a.cpu->steal) / (b.cpu->total - a.cpu->total);
    if (a.pressure.where != b.pressure.where || secs <= 0) return;
    out.psi_from = b.pressure.where;
    auto percent = [&](const std::optional<unsigned long long>& x, const std::optional<unsigned long long>& y)
        -> std::optional<double> {
      if (!x || !y || *y < *x) return std::nullopt;
      return std::min(100.0, (*y - *x) / 1e6 / secs * 100.0);
    };
    out.psi_cpu_some = percent(a.pressure.cpu_us, b.pressure.cpu_us);
    out.psi_memory_some = percent(a.pressure.memory_us, b.pressure.memory_us);
    out.psi_io_some = percent(a.pressure.io_us, b.pressure.io_us);
  }
};

SpeedSampler::SpeedSampler(std::chrono::milliseconds window, std::shared_ptr<GpuClocks> gpus, RankGpus rank_gpus)
    : s_(std::make_unique<State>()) {
  s_->window = window;
  s_->gpus = std::move(gpus);
  s_->rank_gpus = std::move(rank_gpus);
}

SpeedSampler::~SpeedSampler() = default;

void SpeedSampler::set_targets(std::vector<Target> targets) {
  targets.erase(std::remove_if(targets.begin(), targets.end(), [](const Target& t) { return t.pid <= 0; }),
                targets.end());
  const auto same = [](const Target& a, const Target& b) {
    return a.rank == b.rank && a.local_rank == b.local_rank && a.pid == b.pid;
  };
  if (targets.size() == s_->targets.size() && std::equal(targets.begin(), targets.end(), s_->targets.begin(), same))
    return;
  s_->targets = targets;
  s_->ranks.clear();
  std::vector<std::string> watched;
  for (const Target& t : targets) {
    State::Rank r;
    r.target = t;
    r.gpu = s_->rank_gpus.of(t.local_rank);
    if (!r.gpu.empty() && std::find(watched.begin(), watched.end(), r.gpu) == watched.end()) watched.push_back(r.gpu);
    s_->ranks.push_back(std::move(r));
  }
  if (s_->gpus) s_->gpus->watch(std::move(watched));
  s_->started = false;
}

std::optional<SpeedSampler::Window> SpeedSampler::tick(std::chrono::steady_clock::time_point now) {
  State& s = *s_;
  if (s.ranks.empty()) return std::nullopt;
  if (!s.started) {
    s.started = true;
    s.window_start = now;
    s.last_slow = now - kSlowEvery;  // the slow signals are sampled at once too
    s.sample(now);
    s.read_edge();
    return std::nullopt;
  }
  s.sample(now);
  if (now - s.window_start < s.window) return std::nullopt;
  return s.finish(now);
}

}  // namespace cxxrun::agent
