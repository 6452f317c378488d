// What each rank did, as the kernel and the driver saw it, one window at a
// time: the data a straggler detector compares across ranks and nodes,
// with no code change in the program (issue 43).
//
// In a synchronous job the straggler computes while its peers wait for it
// in the collective, so the main thread's scheduler state, sampled about
// ten times a second, tells the two apart: running (R) against blocked (S,
// D), and where it blocks (wchan). Beside it, the causes a host gives: the
// rank's CPU cgroup throttled by its quota (agent/straggler/cpu_throttling.h),
// time it waited for a CPU (schedstat), CPU steal and pressure
// (agent/straggler/host_pressure.h), and its GPU's clock held down by heat
// or power (agent/straggler/gpu_clocks.h).
//
// What it costs: every tick one read of /proc/<pid>/stat per rank; once a
// second a wchan read for each blocked rank and the GPU readings (taken by
// the GpuClocks' own thread); once a window, per rank, schedstat,
// /proc/<pid>/cgroup and the cpu.stat of each cgroup above it, and for the
// host /proc/stat and three PSI files. bench/RESULTS.md ("Stragglers: the
// sampler's cost") has the measured figure.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/straggler/gpu_clocks.h"
#include "agent/straggler/rank_gpus.h"

namespace cxxrun::agent {

// What one rank did over one window (default 5 s), as the sampler saw it.
struct RankWindow {
  int rank = 0;          // global rank
  int local_rank = 0;
  pid_t pid = 0;
  double seconds = 0;    // the window's length
  int samples = 0;       // main-thread state samples taken (about 10 a second)
  double running_share = 0;    // share of samples its main thread (tid == pid) was R (running or runnable; a task of a throttled cgroup stays R)
  double blocked_share = 0;    // share in S or D (waiting: a collective, I/O, a lock)
  double cpu_share = 0;        // CPU seconds of the whole process over the window / window seconds (may exceed 1)
  double run_delay_share = 0;  // main thread's schedstat run delay (runnable, waiting for a CPU) / window
  std::string wait_channel;    // most frequent /proc/<pid>/wchan while blocked ("" unknown)
  // Causes on the host for this rank (nullopt / "": not known or not applicable):
  std::optional<double> throttled_share;  // its CPU cgroup's throttled time over the window / window (cpu.stat: v2 throttled_usec, v1 throttled_time), whichever hierarchy limits it; may exceed 1 (summed over CPUs)
  std::string throttled_cgroup;           // that cgroup's directory ("/sys/fs/cgroup/cpu/job/rank-3")
  std::optional<double> gpu_clock_ratio;  // SM clock / max SM clock of the GPU it uses (CUDA_VISIBLE_DEVICES / local rank), the window's mean
  std::string gpu_throttle;               // NVML clock throttle reasons seen in the window, in words: "thermal", "power cap", "hardware slowdown", ... joined by ", "; "" none
  // Added by the signals side:
  std::string gpu;                        // the GPU read for it, as CUDA_VISIBLE_DEVICES names it ("" none)
  std::optional<unsigned long long> nr_throttled;  // periods throttled in the window, of throttled_cgroup
};

struct HostWindow {
  double seconds = 0;
  std::optional<double> steal_share;  // CPU steal over the window (/proc/stat), 0..1 of all CPUs
  std::optional<double> psi_cpu_some, psi_memory_some, psi_io_some;  // % of the window (from the "some" total counters), of the job's cgroup when v2 has it, else /proc/pressure
  // Added by the signals side: where the pressure was read (a cgroup2 directory, or "/proc/pressure").
  std::string psi_from;
};

// Passive: the supervisor's loop calls tick() about every 100 ms with the
// current workers; every `window` it returns what the window saw. Never
// blocks but reading small /proc and cgroup files (GPU readings come from
// GpuClocks, which never waits for the driver). Not thread-safe: one loop.
class SpeedSampler {
 public:
  struct Target { int rank; int local_rank; pid_t pid; };
  // `gpus`: NVML's clocks (agent/health/nvml_clocks.h), nullptr for none;
  // `rank_gpus` says which GPU each local rank uses (RankGpus::from).
  explicit SpeedSampler(std::chrono::milliseconds window, std::shared_ptr<GpuClocks> gpus = nullptr,
                        RankGpus rank_gpus = {});
  ~SpeedSampler();
  SpeedSampler(const SpeedSampler&) = delete;
  SpeedSampler& operator=(const SpeedSampler&) = delete;

  // A new attempt's workers (pids 0 are skipped). A list that differs from
  // the last starts a new window at the next tick; the same list changes
  // nothing.
  void set_targets(std::vector<Target> targets);

  // Samples; returns a finished window when one is due. Its ranks are in
  // set_targets' order; a rank whose process exited (or is a zombie)
  // during the window is left out. Nothing while there are no targets.
  struct Window { std::vector<RankWindow> ranks; HostWindow host; };
  std::optional<Window> tick(std::chrono::steady_clock::time_point now);

  // How often the slower signals are sampled (wchan, GPU clocks): 1 s.
  static constexpr std::chrono::milliseconds kSlowEvery{1000};

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace cxxrun::agent
