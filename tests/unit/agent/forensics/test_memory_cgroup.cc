// The memory cgroups (agent/forensics/memory_cgroup.h): their files' parsing, and
// detection and reading on fake v1, v2 and hybrid trees under a temporary
// directory standing in for /proc and /sys/fs/cgroup. The real kernel's are
// in test_kernel_evidence.cc.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "agent/process/cgroup.h"  // job_cgroup_name
#include "agent/forensics/memory_cgroup.h"
#include "temp_tree.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

TEST_CASE("memory cgroup files: parsing", "[kernel-evidence]") {
  auto m = parse_mountinfo_line("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory");
  REQUIRE(m);
  CHECK(m->root == "/");
  CHECK(m->mount_point == "/sys/fs/cgroup/memory");
  CHECK(m->fstype == "cgroup");
  CHECK(m->super_options == "rw,memory");
  m = parse_mountinfo_line("41 31 0:38 /a\\040b /mnt/with\\040space rw - cgroup2 cgroup2 rw,nsdelegate");
  REQUIRE(m);
  CHECK(m->root == "/a b");
  CHECK(m->mount_point == "/mnt/with space");
  CHECK_FALSE(parse_mountinfo_line("41 31 0:38 / /x rw cgroup2 cgroup2 rw"));

  const std::string hybrid = "9:name=systemd:/\n5:cpu,memory:/a:b\n0::/user.slice\n";
  CHECK(memory_cgroup_path(hybrid, true) == "/a:b");
  CHECK(memory_cgroup_path(hybrid, false) == "/user.slice");
  CHECK(memory_cgroup_path("4:memory:/process_api/x\n", true) == "/process_api/x");
  CHECK_FALSE(memory_cgroup_path("2:cpuacct,cpu:/y\n1:memoryx:/z\n", true));
  CHECK_FALSE(memory_cgroup_path("4:memory:/x\n", false));

  CHECK(keyed_value("cache 0\nhierarchical_memory_limit 33554432\n", "hierarchical_memory_limit") == 33554432);
  CHECK(keyed_value("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill") == 3);
  CHECK(keyed_value("oom 2\noom_kill 1\noom_group_kill 0\n", "oom_kill") == 1);
  CHECK_FALSE(keyed_value("oom_group_kill 4\n", "oom_kill"));

  CHECK_FALSE(parse_limit("max\n"));
  CHECK_FALSE(parse_limit("9223372036854771712\n"));
  CHECK_FALSE(parse_limit(std::to_string(1LL << 62)));
  CHECK(parse_limit(std::to_string((1LL << 62) - 1)) == (1LL << 62) - 1);
  CHECK(parse_limit("33554432\n") == 33554432);
  CHECK_FALSE(parse_limit("lots"));

  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(900 * 1024) == "900 KiB");
  CHECK(format_bytes(512LL << 20) == "512 MiB");
  CHECK(format_bytes(3LL << 29) == "1.5 GiB");
  CHECK(format_bytes(1LL << 30) == "1.0 GiB");
  CHECK(format_bytes(32LL << 20) == "32 MiB");
  CHECK(format_bytes((1LL << 30) - 1) == "1.0 GiB");
  CHECK(format_bytes(10239) == "10 KiB");
  CHECK(format_bytes(-(2LL << 20)) == "-2.0 MiB");
}

TEST_CASE("MemoryCgroups::detect on fake hierarchies", "[kernel-evidence]") {
  TempDir t;
  const std::string& T = t.path;
  MemoryCgroups::Paths paths{T + "/mountinfo", T + "/cgroup", T + "/proc"};
  const std::string hybrid = "31 23 0:28 / " + T + "/fs rw - tmpfs tmpfs rw\n35 31 0:32 / " + T +
                             "/fs/memory rw - cgroup cgroup rw,memory\n41 31 0:38 / " + T +
                             "/fs/unified rw - cgroup2 cgroup2 rw\n";

  SECTION("hybrid: the v1 memory controller") {
    write_file(paths.mountinfo, hybrid);
    write_file(paths.self_cgroup, "4:memory:/process_api/abc\n0::/\n");
    auto m = MemoryCgroups::detect("tok", paths);
    CHECK(m.hierarchy() == MemoryCgroups::Hierarchy::v1);
    CHECK(m.why().empty());
    CHECK(m.mount() == T + "/fs/memory");
    CHECK(m.own_dir() == T + "/fs/memory/process_api/abc");

    write_file(T + "/proc/42/cgroup", "4:memory:/process_api/abc/cxxrun-tok/attempt-0/rank-1\n0::/\n");
    CHECK(m.cgroup_of(42) == T + "/fs/memory/process_api/abc/cxxrun-tok/attempt-0/rank-1");
    CHECK_FALSE(m.cgroup_of(43));

    // mkdir -p below the agent's own cgroup, then the cgroup.procs a plain
    // directory lacks.
    fs::create_directories(m.own_dir());
    std::string why;
    CHECK(m.make_rank(0, 1, why) == -1);
    CHECK(why == "cannot open " + T + "/fs/memory/process_api/abc/" + job_cgroup_name("tok") + "/attempt-0/rank-1/cgroup.procs: " +
                     "No such file or directory");
    CHECK(m.job_dir() == T + "/fs/memory/process_api/abc/" + job_cgroup_name("tok"));
    CHECK(fs::is_directory(m.job_dir() + "/attempt-0/rank-1"));
    m.end_attempt(0);
    CHECK_FALSE(fs::exists(m.job_dir() + "/attempt-0"));
    {
      MemoryCgroups moved = std::move(m);
      CHECK(m.job_dir().empty());
      CHECK(moved.job_dir() == T + "/fs/memory/process_api/abc/" + job_cgroup_name("tok"));
    }
    CHECK_FALSE(fs::exists(T + "/fs/memory/process_api/abc/" + job_cgroup_name("tok")));
  }
  SECTION("v1 where the agent may not create cgroups") {
    write_file(paths.mountinfo, hybrid);
    write_file(paths.self_cgroup, "4:memory:/file\n");
    write_file(T + "/fs/memory/file", "");
    auto m = MemoryCgroups::detect("tok", paths);
    std::string why;
    CHECK(m.make_rank(0, 0, why) == -1);
    CHECK(why == "cannot create a memory cgroup for each rank under " + T + "/fs/memory/file: Not a directory");
    CHECK(m.job_dir().empty());
  }
  SECTION("a mount of a subtree shows paths below its root") {
    write_file(paths.mountinfo, "35 31 0:32 /docker/c1 " + T + "/memory rw - cgroup cgroup rw,memory\n");
    write_file(paths.self_cgroup, "4:memory:/docker/c1/sub\n");
    CHECK(MemoryCgroups::detect("tok", paths).own_dir() == T + "/memory/sub");
    write_file(paths.self_cgroup, "4:memory:/docker/c10\n");
    auto outside = MemoryCgroups::detect("tok", paths);
    CHECK(outside.hierarchy() == MemoryCgroups::Hierarchy::none);
    CHECK(outside.why().find("outside the mounted hierarchy") != std::string::npos);
  }
  SECTION("pure v2: the nearest cgroup with memory files accounts") {
    write_file(paths.mountinfo, "41 31 0:38 / " + T + "/cg rw - cgroup2 cgroup2 rw\n");
    write_file(paths.self_cgroup, "0::/agent.slice/agent\n");
    write_file(T + "/cg/cgroup.controllers", "cpuset cpu io memory pids\n");
    write_file(T + "/cg/agent.slice/agent/cgroup.controllers", "");
    auto m = MemoryCgroups::detect("tok", paths);
    CHECK(m.hierarchy() == MemoryCgroups::Hierarchy::v2);
    std::string why;
    CHECK(m.make_rank(0, 0, why) == -1);
    CHECK(why == "pure cgroup v2: per-rank memory is the job cgroup's");

    write_file(T + "/proc/7/cgroup", "0::/agent.slice/agent/cxxrun-tok/attempt-0\n");
    CHECK_FALSE(m.cgroup_of(7));  // nothing below the root accounts it
    write_file(T + "/cg/agent.slice/memory.events", "oom_kill 0\n");
    CHECK(m.cgroup_of(7) == T + "/cg/agent.slice");
    write_file(T + "/cg/agent.slice/agent/cxxrun-tok/attempt-0/memory.events", "oom_kill 0\n");
    CHECK(m.cgroup_of(7) == T + "/cg/agent.slice/agent/cxxrun-tok/attempt-0");
  }
  SECTION("no memory controller anywhere") {
    write_file(paths.mountinfo, "41 31 0:38 / " + T + "/cg rw - cgroup2 cgroup2 rw\n");
    write_file(paths.self_cgroup, "0::/\n");
    write_file(T + "/cg/cgroup.controllers", "cpu io pids\n");
    auto m = MemoryCgroups::detect("tok", paths);
    CHECK(m.hierarchy() == MemoryCgroups::Hierarchy::none);
    CHECK(m.why().find("no memory cgroup controller is mounted") == 0);
    std::string why;
    CHECK(m.make_rank(0, 0, why) == -1);
    CHECK(why == m.why());
    write_file(paths.mountinfo, "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n");
    CHECK(MemoryCgroups::detect("tok", paths).why() == "no memory cgroup controller is mounted");
  }
}

TEST_CASE("MemoryCgroups::read on fake v1 and v2 cgroups", "[kernel-evidence]") {
  TempDir t;
  const std::string v1 = t.path + "/memory/job/rank-0";
  write_file(v1 + "/memory.limit_in_bytes", "9223372036854771712\n");
  write_file(v1 + "/memory.stat", "cache 0\nhierarchical_memory_limit 33554432\nhierarchical_memsw_limit 9223372036854771712\n");
  write_file(v1 + "/memory.max_usage_in_bytes", "33804288\n");
  write_file(v1 + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  MemoryReading r = MemoryCgroups::read(v1, true);
  CHECK(r.cgroup == v1);
  CHECK(r.own);
  CHECK(r.limit == 33554432);
  CHECK(r.peak == 33804288);
  CHECK(r.oom_kills == 1);
  write_file(v1 + "/memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
  CHECK_FALSE(MemoryCgroups::read(v1, true).limit);

  const std::string root = t.path + "/cg";  // the root cgroup: no memory.max
  write_file(root + "/a/memory.max", "1073741824\n");
  write_file(root + "/a/b/memory.max", "max\n");
  const std::string leaf = root + "/a/b/c";
  write_file(leaf + "/memory.max", "2147483648\n");
  write_file(leaf + "/memory.events", "low 0\nhigh 0\nmax 5\noom 2\noom_kill 1\noom_group_kill 0\n");
  r = MemoryCgroups::read(leaf, false);
  CHECK_FALSE(r.own);
  CHECK(r.limit == 1073741824);
  CHECK_FALSE(r.peak);  // before 5.19
  CHECK(r.oom_kills == 1);
  write_file(leaf + "/memory.peak", "123\n");
  CHECK(MemoryCgroups::read(leaf, false).peak == 123);
  write_file(root + "/a/memory.max", "max\n");
  write_file(leaf + "/memory.max", "max\n");
  CHECK_FALSE(MemoryCgroups::read(leaf, false).limit);

  r = MemoryCgroups::read(t.path + "/missing", true);
  CHECK_FALSE(r.limit);
  CHECK_FALSE(r.peak);
  CHECK_FALSE(r.oom_kills);
}
