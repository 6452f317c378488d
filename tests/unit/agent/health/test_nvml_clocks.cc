// NVML's GPU clocks for the straggler sampler (agent/health/nvml_clocks.h)
// against the fake NVML (tests/fake_nvml/fake_nvml.c, at FAKE_NVML_LIBRARY),
// driven by the state file FAKE_NVML_STATE names: a GPU held at a low SM
// clock by a thermal slowdown, read alone and through SpeedSampler.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/health/nvml_clocks.h"
#include "agent/straggler/signals.h"
#include "fake_nvml_env.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// GPU 1 at 990 of 1980 MHz, held down by a hardware thermal slowdown (the
// driver sets HW slowdown with it); GPU 0 at full speed.
const std::string kHotGpu1 =
    "count=2\n"
    "1.uuid=GPU-bbbb2222-0000-0000-0000-000000000000\n"
    "1.sm_clock=990\n1.max_sm_clock=1980\n1.clock_reasons=0x48\n";

// The newest reading of `gpu`, waiting (bounded) for the reader's thread.
std::optional<GpuClockSample> reading(const GpuClocks& clocks, const std::string& gpu) {
  for (int i = 0; i < 200; ++i) {
    if (auto s = clocks.latest(gpu)) return s;
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("NVML's clocks: SM clock, its maximum and the thermal reason, by index and UUID", "[gpu][straggler]") {
  FakeNvml nvml;
  nvml.write(kHotGpu1);
  std::string why_not;
  auto clocks = NvmlClocks::open(why_not, 50ms);
  INFO(why_not);
  REQUIRE(clocks);
  clocks->watch({"0", "GPU-bbbb2222-0000-0000-0000-000000000000", "7"});
  const auto cool = reading(*clocks, "0");
  REQUIRE(cool);
  CHECK(cool->sm_mhz == 1980u);
  CHECK(cool->max_sm_mhz == 1980u);
  CHECK(cool->reasons == 0u);
  const auto hot = reading(*clocks, "GPU-bbbb2222-0000-0000-0000-000000000000");
  REQUIRE(hot);
  CHECK(hot->sm_mhz == 990u);
  CHECK(hot->reasons == 0x48u);
  CHECK(clock_reason_words(*hot->reasons) == "thermal");
  CHECK_FALSE(clocks->latest("7"));  // no such GPU: no reading, no error

  // The driver stops telling clocks: readings stop being renewed.
  nvml.write("count=2\n0.unsupported=clocks\n");
  const auto before = clocks->latest("0");
  REQUIRE(before);
  std::this_thread::sleep_for(300ms);
  CHECK(clocks->latest("0")->at == before->at);
}

TEST_CASE("no NVML library: no GPU clocks, said in one line", "[gpu][straggler]") {
  setenv("CXXRUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  std::string why_not;
  CHECK_FALSE(NvmlClocks::open(why_not));
  CHECK_THAT(why_not, Catch::Contains("/nonexistent/libnvidia-ml.so.1"));
  unsetenv("CXXRUN_NVML_LIBRARY");
}

TEST_CASE("the sampler names a throttled GPU's slow clock and its cause", "[gpu][straggler]") {
  FakeNvml nvml;
  nvml.write(kHotGpu1);
  std::string why_not;
  auto clocks = NvmlClocks::open(why_not, 100ms);
  REQUIRE(clocks);
  // Two sleeping ranks: local rank 0 on GPU 0, local rank 1 on GPU 1 (no
  // CUDA_VISIBLE_DEVICES).
  pid_t pids[2];
  for (pid_t& pid : pids) {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
      for (;;) pause();
  }
  {
    SpeedSampler sampler(1500ms, clocks, RankGpus{});
    sampler.set_targets({{10, 0, pids[0]}, {11, 1, pids[1]}});
    std::optional<SpeedSampler::Window> w;
    for (int i = 0; i < 100 && !w; ++i) {
      w = sampler.tick(std::chrono::steady_clock::now());
      if (!w) std::this_thread::sleep_for(100ms);
    }
    REQUIRE(w);
    REQUIRE(w->ranks.size() == 2);
    const RankWindow& cool = w->ranks[0];
    const RankWindow& hot = w->ranks[1];
    CHECK(cool.gpu == "0");
    REQUIRE(cool.gpu_clock_ratio);
    CHECK(*cool.gpu_clock_ratio == Approx(1.0));
    CHECK(cool.gpu_throttle.empty());
    CHECK(hot.gpu == "1");
    REQUIRE(hot.gpu_clock_ratio);
    CHECK(*hot.gpu_clock_ratio == Approx(0.5));
    CHECK(*hot.gpu_clock_ratio < 1.0);
    CHECK(hot.gpu_throttle == "thermal");
  }
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}
