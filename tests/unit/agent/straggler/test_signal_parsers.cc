// The straggler sampler's parsers on the kernel's texts, as a few kernels
// and cgroup layouts write them (agent/straggler/task_stat.h,
// cpu_throttling.h, host_pressure.h, gpu_clocks.h, rank_gpus.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agent/process/proc_cgroup.h"
#include "agent/straggler/cpu_throttling.h"
#include "agent/straggler/gpu_clocks.h"
#include "agent/straggler/host_pressure.h"
#include "agent/straggler/rank_gpus.h"
#include "agent/straggler/task_stat.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

TEST_CASE("a task's stat line, its command holding spaces and parentheses", "[straggler]") {
  const auto s = parse_task_stat(
      "4242 (pt (main) ) x) R 1 4242 4242 0 -1 4194560 1200 0 3 0 1500 250 7 9 20 0 12 0 98765 2990080 421 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
  REQUIRE(s);
  CHECK(s->state == 'R');
  CHECK(s->cpu_ticks == 1750u);  // utime 1500 + stime 250; the children's 7 and 9 are not its own
  CHECK(s->start_ticks == 98765u);

  const auto sleeping = parse_task_stat("13646 (sleep) S 13639 13639 10369 0 -1 4194304 129 0 0 0 0 0 0 0 20 0 1 0 2266431 2990080");
  REQUIRE(sleeping);
  CHECK(sleeping->state == 'S');
  CHECK(is_blocked(sleeping->state));
  CHECK(is_gone('Z'));

  CHECK_FALSE(parse_task_stat(""));
  CHECK_FALSE(parse_task_stat("4242 (cut) S 1 2 3"));  // too few fields
  CHECK_FALSE(parse_task_stat("4242 no parentheses S 1"));
}

TEST_CASE("schedstat: time on a CPU and time waiting for one", "[straggler]") {
  const auto s = parse_schedstat("188556 4200000 17\n");
  REQUIRE(s);
  CHECK(s->run_ns == 188556u);
  CHECK(s->run_delay_ns == 4200000u);
  CHECK_FALSE(parse_schedstat("junk"));
}

TEST_CASE("cpu.stat's throttling on cgroup v2 and v1", "[straggler]") {
  const auto v2 = parse_cpu_stat(
      "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\nnr_periods 50\nnr_throttled 45\n"
      "throttled_usec 4100000\nnr_bursts 0\nburst_usec 0\n");
  REQUIRE(v2);
  CHECK(v2->nr_throttled == 45u);
  CHECK(v2->throttled_ns == 4100000000ull);

  const auto v1 = parse_cpu_stat("nr_periods 50\nnr_throttled 44\nthrottled_time 3900000000\nnr_bursts 0\nburst_time 0\n");
  REQUIRE(v1);
  CHECK(v1->nr_throttled == 44u);
  CHECK(v1->throttled_ns == 3900000000ull);

  // A v2 cgroup without the cpu controller counts usage only: not known.
  CHECK_FALSE(parse_cpu_stat("usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\n"));
  // nr_throttled is not throttled_usec's prefix match.
  CHECK_FALSE(parse_cpu_stat("throttled_usecs 5\n"));
}

TEST_CASE("a process's cpu cgroup in /proc/<pid>/cgroup", "[straggler]") {
  const std::string hybrid = "9:name=systemd:/\n4:memory:/m\n2:cpuacct:/\n1:cpu:/job/rank-1\n0::/cxxrun-1-t/attempt-0\n";
  CHECK(cgroup_path(hybrid, "cpu") == "/job/rank-1");
  CHECK(cgroup_path(hybrid, "") == "/cxxrun-1-t/attempt-0");
  CHECK(cgroup_path("3:cpu,cpuacct:/slurm/uid_0/job_7\n", "cpu") == "/slurm/uid_0/job_7");
  CHECK(cgroup_path("3:cpuset:/x\n", "cpu") == std::nullopt);
  CHECK(cgroup_path("0::/a:b\n", "") == "/a:b");
}

TEST_CASE("the cpu cgroups that may throttle a process, on a hybrid layout", "[straggler]") {
  const fs::path dir = fs::temp_directory_path() / ("cxxrun-straggler-parse-" + std::to_string(getpid()));
  fs::create_directories(dir / "proc" / "77");
  std::ofstream(dir / "mountinfo")
      << "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
         "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
         "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  std::ofstream(dir / "proc" / "77" / "cgroup") << "3:cpuset:/\n1:cpu:/job/rank-1\n0::/cxxrun-1-t/attempt-0\n";
  const CpuCgroups c = CpuCgroups::detect((dir / "mountinfo").string(), (dir / "proc").string());
  CHECK(c.v1_mount() == "/sys/fs/cgroup/cpu");
  CHECK(c.v2_mount() == "/sys/fs/cgroup/unified");
  const auto of = c.of(77);
  REQUIRE(of);
  CHECK(of->cpu == std::vector<std::string>{"/sys/fs/cgroup/cpu/job/rank-1", "/sys/fs/cgroup/cpu/job",
                                            "/sys/fs/cgroup/unified/cxxrun-1-t/attempt-0",
                                            "/sys/fs/cgroup/unified/cxxrun-1-t"});
  CHECK(of->v2 == "/sys/fs/cgroup/unified/cxxrun-1-t/attempt-0");
  CHECK_FALSE(c.of(78));  // gone

  // Pure v2 in a container that sees its own subtree as the root: that
  // root may be capped by the host, so it counts.
  std::ofstream(dir / "mountinfo") << "29 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  std::ofstream(dir / "proc" / "77" / "cgroup") << "0::/kubepods/pod1/app\n";
  const CpuCgroups pod = CpuCgroups::detect((dir / "mountinfo").string(), (dir / "proc").string());
  CHECK(pod.v1_mount().empty());
  CHECK(pod.of(77)->cpu == std::vector<std::string>{"/sys/fs/cgroup/app", "/sys/fs/cgroup"});
  fs::remove_all(dir);
}

TEST_CASE("/proc/stat's steal and PSI's some total", "[straggler]") {
  const auto t = parse_proc_stat("cpu  100 10 50 800 20 5 5 10 3 0\ncpu0 50 5 25 400 10 2 3 5 1 0\nintr 1\n");
  REQUIRE(t);
  CHECK(t->steal == 10u);
  CHECK(t->total == 1000u);  // guest (3) is already in user
  const auto old = parse_proc_stat("cpu  100 10 50 800\n");  // a kernel before iowait: no steal column
  REQUIRE(old);
  CHECK(old->steal == 0u);
  CHECK_FALSE(parse_proc_stat("intr 1\n"));

  CHECK(parse_psi_some_total("some avg10=22.19 avg60=33.48 avg300=24.21 total=4776279418\n"
                             "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") == 4776279418ull);
  CHECK(parse_psi_some_total("full avg10=0.00 avg60=0.00 avg300=0.00 total=9\n") == std::nullopt);
}

TEST_CASE("NVML's clock reasons in words", "[straggler]") {
  using namespace clock_reason;
  CHECK(clock_reason_words(0) == "");
  CHECK(clock_reason_words(kGpuIdle) == "");
  CHECK(clock_reason_words(kHwThermalSlowdown | kHwSlowdown) == "thermal");
  CHECK(clock_reason_words(kSwThermalSlowdown) == "thermal");
  CHECK(clock_reason_words(kHwSlowdown) == "hardware slowdown");
  CHECK(clock_reason_words(kSwPowerCap | kHwPowerBrakeSlowdown | kHwSlowdown) == "power brake, power cap");
  CHECK(clock_reason_words(kApplicationsClocksSetting) == "applications clocks setting");
}

TEST_CASE("which GPU a local rank computes on", "[straggler]") {
  RankGpus unset;
  CHECK(unset.of(3) == "3");
  RankGpus listed{std::string("4, 5,GPU-abc"), {}};
  CHECK(listed.of(0) == "4");
  CHECK(listed.of(1) == "5");
  CHECK(listed.of(2) == "GPU-abc");
  CHECK(listed.of(3) == "");  // more ranks than GPUs: not known
  RankGpus empty{std::string(""), {}};
  CHECK(empty.of(0) == "");
  RankGpus virtual_ranks{std::string("0,1"), {"6", "7"}};
  CHECK(virtual_ranks.of(1) == "7");

  cxxrun::agent::Config config;
  config.extra_env["CUDA_VISIBLE_DEVICES"] = "2,3";
  CHECK(RankGpus::from(config, std::string("0,1")).of(1) == "3");
  config.extra_env.clear();
  CHECK(RankGpus::from(config, std::string("0,1")).of(1) == "1");
  CHECK(RankGpus::from(config, std::nullopt).of(1) == "1");
}
