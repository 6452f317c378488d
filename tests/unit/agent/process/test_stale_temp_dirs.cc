// Which temporary directories left behind by an agent killed together with
// its guardian the next agent removes (agent/process/stale_temp_dirs.h).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/process/process_tree.h"  // process_start_time
#include "agent/process/stale_temp_dirs.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

namespace {

// The name owned_temp_template gives, for another owner: "<prefix><pid
// namespace>-<pid>-<start>-XXXXXX" with the namespace this process is in.
std::string owned_by(const std::string& parent, const std::string& prefix, long long pid,
                     unsigned long long start, const std::string& suffix) {
  const std::string mine = owned_temp_template(parent, prefix);
  const size_t ns_at = parent.size() + 1 + prefix.size();
  const std::string ns = mine.substr(ns_at, mine.find('-', ns_at) - ns_at);
  return parent + "/" + prefix + ns + "-" + std::to_string(pid) + "-" + std::to_string(start) + "-" + suffix;
}

// A pid that was ours a moment ago and is no process now.
pid_t a_dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

}  // namespace

TEST_CASE("stale temp dirs: the template names this process and its start time") {
  const std::string made = owned_temp_template("/x", "p-");
  const std::string tail = "-" + std::to_string(getpid()) + "-" + std::to_string(process_start_time(getpid())) +
                           "-XXXXXX";
  CHECK(made.rfind("/x/p-", 0) == 0);
  CHECK(made.size() > tail.size());
  CHECK(made.compare(made.size() - tail.size(), tail.size(), tail) == 0);
  CHECK(process_start_time(getpid()) > 0);
}

TEST_CASE("stale temp dirs: only this user's directories of owners that are gone go, links never followed") {
  const std::string parent = fs::temp_directory_path() / ("stale-temp-" + std::to_string(getpid()));
  fs::remove_all(parent);
  fs::create_directories(parent);
  const std::string prefix = "cxxrun-hook-";
  const unsigned long long my_start = process_start_time(getpid());

  // Made as the agent makes it, by mkdtemp on the template: its owner lives.
  std::string live = owned_temp_template(parent, prefix);
  REQUIRE(mkdtemp(live.data()) != nullptr);
  const std::string gone = owned_by(parent, prefix, a_dead_pid(), 12345, "aaaaaa");
  // Our pid, but another start time: a pid reused by another process.
  const std::string reused = owned_by(parent, prefix, getpid(), my_start + 1, "bbbbbb");
  // An older cxxrun's name, with no owner in it.
  const std::string unrecorded = parent + "/" + prefix + "cccccc";
  // Another prefix: not ours to judge.
  const std::string other_prefix = owned_by(parent, "torchelastic_", a_dead_pid(), 1, "dddddd");
  for (const std::string& d : {live, gone, reused, unrecorded, other_prefix}) fs::create_directories(d + "/python");
  std::ofstream(gone + "/python/sitecustomize.py") << "\n";

  // A link named as a dead owner's directory, to a directory whose contents
  // must survive.
  const std::string target = parent + "/target";
  fs::create_directories(target);
  std::ofstream(target + "/keep") << "\n";
  const std::string link = owned_by(parent, prefix, a_dead_pid(), 1, "eeeeee");
  fs::create_directory_symlink(target, link);

  // Another user's directory of a dead owner (root can make one).
  const std::string foreign = owned_by(parent, prefix, a_dead_pid(), 1, "ffffff");
  fs::create_directories(foreign);
  const bool chowned = geteuid() == 0 && chown(foreign.c_str(), 65534, 65534) == 0;

  CHECK(remove_stale_temp_dirs(parent, prefix) == 2);
  CHECK_FALSE(fs::exists(gone));
  CHECK_FALSE(fs::exists(reused));
  CHECK(fs::exists(live + "/python"));
  CHECK(fs::exists(unrecorded));
  CHECK(fs::exists(other_prefix));
  CHECK(fs::is_symlink(link));
  CHECK(fs::exists(target + "/keep"));
  if (chowned) CHECK(fs::exists(foreign));
  fs::remove_all(parent);
}

TEST_CASE("stale temp dirs: nothing is removed in a directory others can change") {
  const std::string parent = fs::temp_directory_path() / ("stale-temp-open-" + std::to_string(getpid()));
  fs::remove_all(parent);
  fs::create_directories(parent);
  chmod(parent.c_str(), 0777);  // writable by all, not sticky
  const std::string gone = owned_by(parent, "p-", a_dead_pid(), 1, "aaaaaa");
  fs::create_directories(gone);
  CHECK(remove_stale_temp_dirs(parent, "p-") == 0);
  CHECK(fs::exists(gone));
  fs::remove_all(parent);
}
