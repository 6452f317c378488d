// What the straggler sampler (agent/straggler/signals.h) costs the agent's
// loop: N ranks, real processes (half spinning, half sleeping), ticked
// back to back with the clock advanced 100 ms a tick (so every tick does
// what a 10 Hz tick does: a state read per rank, the 1 s signals every
// tenth tick, a window's edge every `window_ms`), timed by this thread's CPU
// clock. --real 1 sleeps 100 ms between ticks instead (slow: ticks/10 s).
//
//   build/bench/sampler_cost --ranks 8 --ticks 6000
//
// Prints the CPU per tick, per rank per tick, and what that is at 10 Hz, and
// the last window's view of each rank as a check that it saw them.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "agent/straggler/signals.h"
#include "args.h"

using namespace cxxrun::agent;

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 8, ticks = 6000, window_ms = 5000;
  bool real = false;
  if (!bench_args::parse("sampler_cost", argc, argv,
                         {bench_args::arg("--ranks", ranks), bench_args::arg("--ticks", ticks),
                          bench_args::arg("--window-ms", window_ms), bench_args::arg("--real", real)}))
    return 2;
  if (ranks < 1 || ranks > 1024 || ticks < 1 || window_ms < 100) {
    std::fprintf(stderr, "sampler_cost: --ranks must be 1..1024, --ticks >= 1, --window-ms >= 100\n");
    return 2;
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < ranks; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      break;
    }
    if (pid == 0) {
      volatile unsigned long n = 0;
      if (i % 2 == 0)
        for (;;) n = n + 1;
      for (;;) pause();
    }
    pids.push_back(pid);
  }
  std::vector<SpeedSampler::Target> targets;
  for (int i = 0; i < static_cast<int>(pids.size()); ++i) targets.push_back({i, i, pids[i]});

  SpeedSampler sampler{std::chrono::milliseconds(window_ms)};
  sampler.set_targets(targets);
  auto now = std::chrono::steady_clock::now();
  std::optional<SpeedSampler::Window> last;
  int windows = 0;
  const double cpu0 = thread_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  for (int t = 0; t < ticks; ++t) {
    if (real) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      now = std::chrono::steady_clock::now();
    } else {
      now += std::chrono::milliseconds(100);
    }
    if (auto w = sampler.tick(now)) {
      last = std::move(w);
      ++windows;
    }
  }
  const double cpu = thread_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);

  const double per_tick_us = cpu / ticks * 1e6;
  std::printf("ranks %d, ticks %d (%s), windows %d of %d ms\n", static_cast<int>(pids.size()), ticks,
              real ? "real 100 ms apart" : "back to back, clock +100 ms each", windows, window_ms);
  std::printf("CPU %.3f s over %.3f s wall: %.1f us a tick, %.2f us a rank a tick; at 10 Hz %.3f %% of a CPU (%.4f %% a rank)\n",
              cpu, wall, per_tick_us, per_tick_us / pids.size(), per_tick_us * 10 / 1e4,
              per_tick_us * 10 / 1e4 / pids.size());
  if (last) {
    for (const RankWindow& r : last->ranks)
      std::printf("  rank %d: samples %d running %.2f blocked %.2f cpu %.2f run_delay %.2f wchan %s throttled %s\n",
                  r.rank, r.samples, r.running_share, r.blocked_share, r.cpu_share, r.run_delay_share,
                  r.wait_channel.empty() ? "-" : r.wait_channel.c_str(),
                  r.throttled_share ? std::to_string(*r.throttled_share).c_str() : "-");
    std::printf("  host: steal %s psi cpu %s memory %s io %s (from %s)\n",
                last->host.steal_share ? std::to_string(*last->host.steal_share).c_str() : "-",
                last->host.psi_cpu_some ? std::to_string(*last->host.psi_cpu_some).c_str() : "-",
                last->host.psi_memory_some ? std::to_string(*last->host.psi_memory_some).c_str() : "-",
                last->host.psi_io_some ? std::to_string(*last->host.psi_io_some).c_str() : "-",
                last->host.psi_from.c_str());
  }
  return 0;
}
