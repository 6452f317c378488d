// The node checks that need no GPU (agent/health/host_checks.h): a site's command,
// writable paths with free space, RDMA ports in a sysfs tree the test writes.
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/health/host_checks.h"
#include "agent/health/node_health.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

using namespace cxxrun::agent;
using namespace std::chrono_literals;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct HostChecksDir {
  fs::path path;
  HostChecksDir() {
    std::string t = (fs::temp_directory_path() / "cxxrun_checks_XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~HostChecksDir() { fs::remove_all(path); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
};

}  // namespace

TEST_CASE("health command: exit 0 is healthy; otherwise its first line is the reason") {
  CheckResult ok = check_command("echo all good; echo more", 5s);
  CHECK(ok.healthy);
  CHECK(ok.detail == "all good");
  CheckResult bad = check_command("echo; echo 'ECC errors on GPU 2'; exit 3", 5s);
  CHECK_FALSE(bad.healthy);
  CHECK(bad.detail == "ECC errors on GPU 2 (exit 3 of 'echo; echo 'ECC errors on GPU 2'; exit 3')");
  // stdout says nothing: stderr's first line.
  CHECK_THAT(check_command("echo 'nvidia-smi: not found' >&2; exit 127", 5s).detail,
             Contains("nvidia-smi: not found (exit 127"));
  CHECK_THAT(check_command("exit 1", 5s).detail, Contains("no reason given (exit 1"));
  CHECK_THAT(check_command("kill -KILL $$", 5s).detail, Contains("killed by signal 9"));
}

TEST_CASE("health command: one that hangs is killed at its bound, and what it left running with it") {
  HostChecksDir dir;
  const std::string pidfile = (dir.path / "child").string();
  const auto start = std::chrono::steady_clock::now();
  CheckResult r = check_command("echo checking; sleep 100 & echo $! > " + pidfile + "; wait", 300ms);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_FALSE(r.healthy);
  CHECK_THAT(r.detail, Contains("did not finish within 0.3 s; it said: checking"));
  std::ifstream in(pidfile);
  pid_t child = 0;
  in >> child;
  REQUIRE(child > 0);
  // Dead, or a zombie whose parent went too (init reaps it when it will).
  auto alive = [child] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, comm, state;
    return static_cast<bool>(stat >> pid >> comm >> state) && state != "Z";
  };
  for (int i = 0; i < 100 && alive(); ++i) usleep(10000);
  CHECK_FALSE(alive());  // the group went with it
}

TEST_CASE("health command: a daemon it leaves holding stdout does not hold the verdict") {
  HostChecksDir dir;
  const auto start = std::chrono::steady_clock::now();
  CheckResult r = check_command("sleep 100 & echo started", 10s);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(r.healthy);
  CHECK(r.detail == "started");
}

namespace {

// Dead, or a zombie whose parent went too (init reaps it when it will).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string p, comm, state;
  return static_cast<bool>(stat >> p >> comm >> state) && state != "Z";
}

pid_t read_pid(const std::string& file) {
  pid_t pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::ifstream in(file);
    if (!(in >> pid)) pid = 0, usleep(10000);
  }
  return pid;
}

}  // namespace

TEST_CASE("health command: what it starts in a session of its own ends with it") {
  HostChecksDir dir;
  const std::string pidfile = (dir.path / "daemon").string();
  // Not in the command's process group (it has left it before the command
  // ends): only containment finds it.
  CheckResult r = check_command("setsid sh -c 'echo $$ > " + pidfile + "; exec sleep 100' </dev/null >/dev/null 2>&1 & "
                                "while [ ! -s " + pidfile + " ]; do sleep 0.01; done; echo ok",
                                10s);
  CHECK(r.healthy);
  const pid_t daemon = read_pid(pidfile);
  REQUIRE(daemon > 0);
  for (int i = 0; i < 100 && alive(daemon); ++i) usleep(10000);
  const bool left = alive(daemon);
  if (left) kill(daemon, SIGKILL);
  CHECK_FALSE(left);
}

TEST_CASE("health command: a stop ends it at once, with what it started") {
  HostChecksDir dir;
  const std::string pidfile = (dir.path / "child").string();
  CheckStop stop;
  std::thread stopper([&] {
    read_pid(pidfile);
    stop.stop();
  });
  const auto start = std::chrono::steady_clock::now();
  CheckResult r = check_command("setsid sleep 100 & echo $! > " + pidfile + "; wait", 60s, &stop);
  stopper.join();
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  CHECK(r.stopped);
  CHECK_FALSE(r.healthy);
  const pid_t child = read_pid(pidfile);
  REQUIRE(child > 0);
  for (int i = 0; i < 100 && alive(child); ++i) usleep(10000);
  const bool left = alive(child);
  if (left) kill(child, SIGKILL);
  CHECK_FALSE(left);
  // Stopped: later checks do not run at all.
  CHECK(check_command("touch " + (dir.path / "ran").string(), 5s, &stop).stopped);
  CHECK_FALSE(fs::exists(dir.path / "ran"));
}

TEST_CASE("health command: control characters it prints reach the log escaped") {
  CheckResult r = check_command("printf '\\033[2J\\033[31mGPU 3 is gone\\033[0m\\a\\tok\\n'; exit 1", 5s);
  CHECK_FALSE(r.healthy);
  CHECK(r.detail.find('\x1b') == std::string::npos);
  CHECK(r.detail.find('\a') == std::string::npos);
  CHECK_THAT(r.detail, Contains("\\x1b[2J\\x1b[31mGPU 3 is gone\\x1b[0m\\x07\tok (exit 1"));
  CHECK(printable("a\x7f\x01" "b") == "a\\x7f\\x01b");
}

TEST_CASE("health path: writable with the free space asked for") {
  HostChecksDir dir;
  CheckResult ok = check_path({dir.path.string(), 1}, 5s);
  CHECK(ok.healthy);
  CHECK_THAT(ok.detail, Contains("writable") && Contains("free"));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 0);  // the probe is gone
  CheckResult full = check_path({dir.path.string(), 1ull << 60}, 5s);
  CHECK_FALSE(full.healthy);
  CHECK_THAT(full.detail, Contains("less than the 1024.0 PiB required"));
  CheckResult missing = check_path({(dir.path / "nope").string(), 0}, 5s);
  CHECK_FALSE(missing.healthy);
  CHECK_THAT(missing.detail, Contains("does not exist (not mounted?)"));
  const std::string file = (dir.path / "file").string();
  std::ofstream(file) << "x";
  CHECK_THAT(check_path({file, 0}, 5s).detail, Contains(file + " is not a directory"));
  fs::remove(file);
  if (geteuid() != 0) {
    fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THAT(check_path({dir.path.string(), 0}, 5s).detail, Contains("cannot create a file"));
    fs::permissions(dir.path, fs::perms::owner_all);
  }
  CHECK_THAT(check_path({"/proc", 0}, 5s).detail, Contains("cannot create a file in /proc"));
}

TEST_CASE("rdma: every port active, disabled ones aside; none at all is nothing to check") {
  HostChecksDir sys;
  CHECK_FALSE(check_rdma_ports(sys.path.string()).has_value());
  sys.write("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  sys.write("class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n");
  sys.write("class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
  sys.write("class/infiniband/mlx5_1/ports/1/phys_state", "5: LinkUp\n");
  sys.write("class/infiniband/mlx5_1/ports/2/state", "1: DOWN\n");
  sys.write("class/infiniband/mlx5_1/ports/2/phys_state", "3: Disabled\n");
  auto ok = check_rdma_ports(sys.path.string());
  REQUIRE(ok);
  CHECK(ok->healthy);
  CHECK(ok->detail == "2 ports active");
  sys.write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  sys.write("class/infiniband/mlx5_0/ports/1/phys_state", "2: Polling\n");
  auto bad = check_rdma_ports(sys.path.string());
  REQUIRE(bad);
  CHECK_FALSE(bad->healthy);
  CHECK(bad->detail == "RDMA port mlx5_0/1 is DOWN (Polling)");
}

TEST_CASE("node health: the checks in order, the first failure ends them, and the last verdicts stay") {
  HostChecksDir dir;
  Config c;
  c.health.paths = {{dir.path.string(), 0}, {(dir.path / "gone").string(), 0}};
  c.health.command = "echo should not run";
  NodeHealth health(c);
  CHECK_FALSE(health.empty());
  auto results = health.check(false);
  REQUIRE(results.size() >= 2);
  const CheckResult* failed = first_failure(results);
  REQUIRE(failed != nullptr);
  CHECK(failed->name == "path " + (dir.path / "gone").string());
  CHECK(results.back().name == failed->name);  // the command did not run
  CHECK(failure_line(*failed) == "health check 'path " + (dir.path / "gone").string() + "' failed: " +
                                     (dir.path / "gone").string() + " does not exist (not mounted?)");
  CHECK(health.last().size() == results.size());
  CHECK(NodeHealth(Config{}).empty() == !check_rdma_ports().has_value());
}

TEST_CASE("exclude file: one line per node that steps out, appended") {
  HostChecksDir dir;
  const std::string file = (dir.path / "exclude").string();
  exclude_this_node(file);
  exclude_this_node(file);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::ifstream in(file);
  std::string a, b, c;
  std::getline(in, a), std::getline(in, b);
  CHECK(a == host);
  CHECK(b == host);
  CHECK_FALSE(std::getline(in, c));
}

TEST_CASE("stepping out: one act, first round or restart: the line, the event, the exclude file") {
  HostChecksDir dir;
  Config c;
  c.run_id = "job7";
  c.health.exclude_file = (dir.path / "exclude").string();
  const CheckResult failed{"rdma", false, "RDMA port mlx5_0/1 is DOWN (Polling)", {}};
  std::ostringstream said;
  spdlog::logger log("node", std::make_shared<spdlog::sinks::ostream_sink_st>(said));
  log.set_pattern("%v");
  std::vector<std::string> events;
  const auto record = [&](const std::string& check, const std::string& line) { events.push_back(check + ": " + line); };
  const std::string line = step_out_of_job(log, c, failed, false, record);
  step_out_of_job(log, c, failed, true, record);
  CHECK(line == failure_line(failed));
  CHECK(said.str() == "this node is unhealthy (" + line + "); it does not join job job7, so that a spare can take its place\n"
                      "this node is unhealthy (" + line + "); it steps out of job job7 so that a spare can take its place\n");
  CHECK(events == std::vector<std::string>(2, "rdma: " + line));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::ifstream in(c.health.exclude_file);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == std::string(host) + "\n" + host + "\n");
}

TEST_CASE("exclude file: a last line left without its end is ended first") {
  HostChecksDir dir;
  const std::string file = (dir.path / "exclude").string();
  dir.write("exclude", "node7");
  exclude_this_node(file);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "node7\n" + std::string(host) + "\n");
}

TEST_CASE("exclude file: a link another user planted is not followed, nor a FIFO written") {
  if (geteuid() != 0) {
    WARN("skipped: needs root, to make a link of another user's");
    return;
  }
  HostChecksDir dir;
  dir.write("target", "");
  const fs::path link = dir.path / "exclude";
  fs::create_symlink(dir.path / "target", link);
  REQUIRE(lchown(link.c_str(), 12345, 12345) == 0);
  exclude_this_node(link.string());
  CHECK(fs::file_size(dir.path / "target") == 0);
  // This user's own link is the user's choice: followed.
  REQUIRE(lchown(link.c_str(), 0, 0) == 0);
  exclude_this_node(link.string());
  CHECK(fs::file_size(dir.path / "target") > 0);
  // A FIFO with no reader would block the node's exit.
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  exclude_this_node(fifo.string());
}
