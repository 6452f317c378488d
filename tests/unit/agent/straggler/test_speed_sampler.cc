// SpeedSampler against real child processes (agent/straggler/signals.h):
// what the kernel says of a spinning and a sleeping rank, a rank whose CPU
// cgroup is capped at 10 % (root and a v1 cpu hierarchy only), and a rank
// that exits mid-window. Windows are short (1 s) and ticks are counted,
// never timed: a loaded machine only makes the loops take longer.
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "agent/straggler/cpu_throttling.h"
#include "agent/straggler/signals.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

// A child that spins, sleeps or exits after `exit_after`; killed and reaped
// at scope end.
struct SampledChild {
  enum Kind { spin, sleep, exit_soon };
  explicit SampledChild(Kind kind) {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      volatile unsigned long n = 0;
      if (kind == spin)
        for (;;) n = n + 1;
      if (kind == exit_soon) {
        usleep(300'000);
        _exit(0);
      }
      for (;;) pause();
    }
  }
  ~SampledChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  SampledChild(const SampledChild&) = delete;
  SampledChild& operator=(const SampledChild&) = delete;
  pid_t pid = -1;
};

// Ticks every 100 ms until a window comes, at most `ticks` times.
std::optional<SpeedSampler::Window> next_window(SpeedSampler& sampler, int ticks = 100) {
  for (int i = 0; i < ticks; ++i) {
    if (auto w = sampler.tick(std::chrono::steady_clock::now())) return w;
    std::this_thread::sleep_for(100ms);
  }
  return std::nullopt;
}

const RankWindow* find_rank(const SpeedSampler::Window& w, int rank) {
  for (const RankWindow& r : w.ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("a spinning rank reads as running, a sleeping one as blocked", "[straggler]") {
  SampledChild spinner(SampledChild::spin), sleeper(SampledChild::sleep);
  SpeedSampler sampler(1000ms);
  sampler.set_targets({{0, 0, spinner.pid}, {1, 1, sleeper.pid}, {2, 2, 0}});  // pid 0: skipped
  const auto w = next_window(sampler);
  REQUIRE(w);
  REQUIRE(w->ranks.size() == 2);
  const RankWindow& spin = w->ranks[0];
  const RankWindow& sleep = w->ranks[1];
  CHECK(spin.rank == 0);
  CHECK(spin.pid == spinner.pid);
  CHECK(spin.samples >= 5);
  CHECK(spin.seconds >= 0.9);
  // R counts runnable too, so a spinner waiting for a busy CPU is still running.
  CHECK(spin.running_share > 0.8);
  CHECK(spin.blocked_share < 0.2);
  CHECK(spin.cpu_share > 0.05);
  CHECK(sleep.rank == 1);
  CHECK(sleep.blocked_share > 0.9);
  CHECK(sleep.running_share < 0.1);
  CHECK(sleep.cpu_share < 0.05);
  // No GPU reader: no GPU fields.
  CHECK_FALSE(spin.gpu_clock_ratio);
  CHECK(spin.gpu_throttle.empty());
  CHECK(w->host.seconds >= 0.9);
  if (w->host.steal_share) CHECK(*w->host.steal_share >= 0.0);
}

TEST_CASE("a rank that exits mid-window is dropped, the others reported", "[straggler]") {
  SampledChild stays(SampledChild::sleep), leaves(SampledChild::exit_soon);
  SpeedSampler sampler(1000ms);
  sampler.set_targets({{0, 0, stays.pid}, {1, 1, leaves.pid}});
  const auto w = next_window(sampler);
  REQUIRE(w);
  REQUIRE(w->ranks.size() == 1);  // the zombie, then the reaped pid, are gone
  CHECK(w->ranks[0].rank == 0);
  const auto w2 = next_window(sampler);
  REQUIRE(w2);
  CHECK(w2->ranks.size() == 1);
}

TEST_CASE("no targets, no windows; a new list starts a new window", "[straggler]") {
  SpeedSampler sampler(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(sampler.tick(t0));
  CHECK_FALSE(sampler.tick(t0 + 1s));
  SampledChild a(SampledChild::sleep);
  sampler.set_targets({{5, 0, a.pid}});
  CHECK_FALSE(sampler.tick(t0 + 2s));  // the window starts here
  const auto w = sampler.tick(t0 + 2s + 150ms);
  REQUIRE(w);
  REQUIRE(w->ranks.size() == 1);
  CHECK(w->ranks[0].rank == 5);
  CHECK(w->ranks[0].samples == 2);
  CHECK(w->ranks[0].seconds == Approx(0.15));
  sampler.set_targets({{5, 0, a.pid}});  // the same: the window goes on
  CHECK(sampler.tick(t0 + 2s + 300ms));
}

// A v1 cpu cgroup of our own, capped at 10 % of one CPU, removed at scope end.
struct CappedCgroup {
  explicit CappedCgroup(const std::string& mount) {
    path = mount + "/cxxrun-straggler-test-" + std::to_string(getpid());
    ok = mkdir(path.c_str(), 0755) == 0 || errno == EEXIST;
    ok = ok && write("cpu.cfs_period_us", "100000") && write("cpu.cfs_quota_us", "10000");
  }
  bool write(const std::string& file, const std::string& text) const {
    std::ofstream out(path + "/" + file);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }
  ~CappedCgroup() {
    // Its processes are killed and reaped by then; an exiting one leaves a moment later.
    for (int i = 0; i < 50 && rmdir(path.c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(20ms);
  }
  std::string path;
  bool ok = false;
};

TEST_CASE("a rank in a v1 cpu cgroup capped at 10 % reads as throttled, naming the cgroup", "[straggler][root]") {
  const CpuCgroups cgroups = CpuCgroups::detect();
  if (geteuid() != 0 || cgroups.v1_mount().empty()) {
    WARN("skipped: needs root and a v1 cpu hierarchy (this host: " << (geteuid() == 0 ? "root" : "not root")
         << ", v1 cpu " << (cgroups.v1_mount().empty() ? "none" : cgroups.v1_mount()) << ")");
    return;
  }
  CappedCgroup capped(cgroups.v1_mount());
  REQUIRE(capped.ok);
  {
    SampledChild spinner(SampledChild::spin), free_one(SampledChild::sleep);
    REQUIRE(capped.write("cgroup.procs", std::to_string(spinner.pid)));
    SpeedSampler sampler(1000ms);
    sampler.set_targets({{0, 0, spinner.pid}, {1, 1, free_one.pid}});
    // The first window may start before the quota bites; a few more are allowed.
    std::optional<double> share;
    std::string named;
    for (int i = 0; i < 5 && !(share && *share > 0); ++i) {
      const auto w = next_window(sampler);
      REQUIRE(w);
      const RankWindow* r = find_rank(*w, 0);
      REQUIRE(r);
      share = r->throttled_share;
      named = r->throttled_cgroup;
      CHECK(r->running_share > 0.8);  // throttled, yet runnable
    }
    REQUIRE(share);
    CHECK(*share > 0.3);  // about 0.9 of the time held back
    CHECK(named == capped.path);
  }
}

TEST_CASE("pressure is the ranks' own cgroup2 directory's when they share one, else the host's", "[straggler][root]") {
  const CpuCgroups cgroups = CpuCgroups::detect();
  const std::string dir = cgroups.v2_mount() + "/cxxrun-straggler-psi-" + std::to_string(getpid());
  if (geteuid() != 0 || cgroups.v2_mount().empty() || mkdir(dir.c_str(), 0755) != 0) {
    WARN("skipped: needs root and a writable cgroup2 mount");
    return;
  }
  {
    SampledChild a(SampledChild::sleep), b(SampledChild::sleep);
    for (pid_t pid : {a.pid, b.pid}) std::ofstream(dir + "/cgroup.procs") << pid << std::flush;
    SpeedSampler sampler(300ms);
    sampler.set_targets({{0, 0, a.pid}, {1, 1, b.pid}});
    const auto w = next_window(sampler);
    REQUIRE(w);
    if (std::ifstream(dir + "/cpu.pressure")) {
      CHECK(w->host.psi_from == dir);
      REQUIRE(w->host.psi_cpu_some);
      CHECK(*w->host.psi_cpu_some >= 0.0);
      CHECK(*w->host.psi_cpu_some <= 100.0);
    } else {
      CHECK(w->host.psi_from == "/proc/pressure");  // a kernel without cgroup PSI
    }
  }
  for (int i = 0; i < 50 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(20ms);
}
