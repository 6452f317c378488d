// Who is a straggler among its peers: the ranks of one node, or the nodes
// of one job. Pure: windows in (agent/straggler/signals.h's, made peer-
// shaped), verdicts out; the supervisor's loop feeds it through
// agent/straggler/straggler_watch.h. docs/stragglers.md explains the rule.
//
// A peer is slow in a window by one of three signals, each judged against
// the median of the OTHER peers (leave-one-out, so that two peers can be
// told apart and a straggler cannot pull its own yardstick) with a spread
// of 3 scaled MADs of those others, never less than an absolute floor (a
// tiny MAD of near-identical peers must not flag noise):
//   step     its seconds per step (where ranks report steps at different
//            rates): 1.3x the others' median and 0.25x above it at least;
//   compute  the share of the window its main thread was running or
//            runnable while the others' median waited (blocked) at least
//            20 %: one-sided, the straggler computes while its peers wait
//            in the collective; 0.2 above the others' median and 1.3x it;
//   gpu      its SM clock, with an NVML throttle reason, 0.15 below the
//            others' median (an idle GPU's clock is low for no fault: a
//            reason is required).
// A job that is uniformly slow has no straggler: every signal is relative.
// Hysteresis: a peer is named once kNameAfter of its last kNameWithin
// windows were slow (one window lost to a burst of noise on a loaded host
// delays the name by one window, not a whole streak), and cleared after
// kClearAfter windows in a row not slow.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

// What one peer did in one window, as detection sees it.
struct PeerWindow {
  int id = 0;             // global rank, or group rank
  double running = 0;     // share of the window computing (R: running or runnable)
  double blocked = 0;     // share waiting (S, D: a collective, I/O, a lock)
  std::optional<double> step_seconds;  // seconds per step, where it reports steps
  std::optional<double> gpu_clock;     // SM clock / its maximum
  std::string gpu_throttle;            // NVML's throttle reasons in words; "" none
  // Host causes that would explain it (nullopt: not known here).
  std::optional<double> throttled;     // its CPU cgroup's throttled share
  std::string cgroup;                  // that cgroup ("" unknown)
  double run_delay = 0;                // runnable, waiting for a CPU
  std::optional<double> steal;         // the host's CPU steal share
  std::optional<double> psi_cpu, psi_memory, psi_io;  // share of the window some task stalled (0..1)
};

enum class SlowSignal { step, compute, gpu };
std::string_view signal_name(SlowSignal s);  // "step", "compute", "gpu-clock"

inline constexpr int kNameAfter = 3;   // slow windows before a peer is named,
inline constexpr int kNameWithin = 4;  // among its last this many
inline constexpr int kClearAfter = 6;  // windows in a row not slow before it is cleared
inline constexpr std::size_t kCauseWindows = 6;  // how many windows the cause is read over (30 s of 5 s)

// One peer slow in one window, by `signal`: `ratio` is how much slower
// (> 1), `value` its own reading and `peers` the others' median.
struct SlowPeer {
  int id = 0;
  SlowSignal signal = SlowSignal::compute;
  double ratio = 1;
  double value = 0;
  double peers = 0;
};

// The peers slow in this window, each by the first signal that says so
// (step, compute, gpu). Fewer than two peers: none.
std::vector<SlowPeer> slow_peers(const std::vector<PeerWindow>& window);

// A host cause that explains a slow peer, read over the last windows.
struct SlowCause {
  enum class Kind { cgroup_throttle, gpu_throttle, steal, cpu_wait, psi_memory, psi_io, psi_cpu };
  Kind kind = Kind::cgroup_throttle;
  double share = 0;    // of the time, 0..1; for the GPU its SM clock / its maximum
  std::string detail;  // the cgroup's path, or the GPU's throttle reasons
  double seconds = 0;  // the span it was read over: the windows that had a reading
};
std::string_view cause_name(SlowCause::Kind k);  // "cgroup-throttle", "gpu-throttle", "steal", "cpu-wait", ...

// The causes that set peer `id` apart in `history` (oldest window first,
// each `seconds` long), strongest kind first: its own share above a floor
// and above the others' median by as much. Host-wide causes (steal,
// pressure) only between nodes. Time its cgroup throttled it is not also a
// wait for a CPU (the kernel counts it as both).
std::vector<SlowCause> causes_of(int id, const std::deque<std::vector<PeerWindow>>& history,
                                 const std::deque<double>& seconds, bool nodes);
// "its cgroup /sys/fs/cgroup/cpu/job was CPU-throttled for 48 % of the last
// 30 s"; for none, that no host cause was found.
std::string describe_causes(const std::vector<SlowCause>& causes);

// A peer named or cleared, with what a user reads.
struct StragglerVerdict {
  int id = 0;
  bool named = true;      // false: cleared
  SlowSignal signal = SlowSignal::compute;
  double ratio = 1;       // mean over the windows that named it
  double value = 0, peers = 0;  // the last window's reading and the others' median
  std::vector<SlowCause> causes;
};

// "computes 3.9x as long as the median rank between collectives",
// "takes 2.1x the median rank's step time (3.20 s against 1.52 s)",
// "runs its GPU at 0.46x the median rank's SM clock"; `peer` is "rank" or
// "node".
std::string describe_slowness(const StragglerVerdict& v, const std::string& peer);

// Names and clears peers across windows (the hysteresis), and reads their
// causes. One per scope: the ranks of this node, or the nodes of the job.
class PeerJudge {
 public:
  // `nodes`: the peers are nodes (host-wide causes count).
  explicit PeerJudge(bool nodes) : nodes_(nodes) {}
  // One window of every peer; returns those named or cleared by it.
  std::vector<StragglerVerdict> window(const std::vector<PeerWindow>& peers, double seconds);
  bool named(int id) const { return named_.count(id) > 0; }
  const std::map<int, StragglerVerdict>& current() const { return named_; }
  // A new attempt: nothing is known of its peers.
  void reset();

 private:
  struct Streak {
    std::deque<bool> recent;    // the last kNameWithin windows: slow or not
    int normal = 0;             // windows in a row not slow
    std::deque<double> ratios;  // the last kNameAfter slow windows'
  };
  bool nodes_;
  std::deque<std::vector<PeerWindow>> history_;
  std::deque<double> seconds_;
  std::map<int, Streak> streaks_;
  std::map<int, StragglerVerdict> named_;
};

}  // namespace cxxrun::agent
