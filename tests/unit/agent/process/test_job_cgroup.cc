// How job cgroups are named and which left-behind ones an agent removes
// (agent/process/cgroup.h), on a fake tree.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/process/cgroup.h"

using namespace cxxrun::agent;

TEST_CASE("stale job cgroups: only empty ones of agents that are gone are removed, never killed") {
  namespace fs = std::filesystem;
  const std::string parent = fs::temp_directory_path() / ("stale-cgroups-" + std::to_string(getpid()));
  fs::remove_all(parent);
  // A pid that cannot exist (pid_max is at most 2^22), one that does (ours),
  // an old-style name without a pid, and a busy tree (a file stands for a
  // process: rmdir fails on it as on a populated cgroup).
  const std::string gone = parent + "/cxxrun-4194305-aaaa", live = parent + "/" + job_cgroup_name("bbbb"),
                    old = parent + "/cxxrun-cccc", busy = parent + "/cxxrun-4194306-dddd";
  for (const std::string& d : {gone + "/attempt-0/rank-1", live + "/attempt-0", old, busy + "/attempt-0"})
    fs::create_directories(d);
  std::ofstream(busy + "/attempt-0/cgroup.procs") << "42\n";
  remove_stale_job_cgroups(parent);
  CHECK_FALSE(fs::exists(gone));
  CHECK(fs::exists(live + "/attempt-0"));
  CHECK(fs::exists(old));
  CHECK(fs::exists(busy + "/attempt-0"));
  fs::remove_all(parent);
}
