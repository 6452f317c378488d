#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/hang/heartbeat_monitor.h"
#include "common/heartbeat_layout.h"
#include "worker_runtime/heartbeat.h"

using cxxrun::agent::HeartbeatMonitor;
using cxxrun::agent::HeartbeatViolation;
using namespace std::chrono_literals;
using std::chrono::nanoseconds;

namespace {

nanoseconds now() { return nanoseconds(cxxrun::heartbeat::monotonic_ns()); }

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// This process plays the worker of local rank 0: the runtime is attached to
// the page the monitor made, and detached again at the end of the test.
struct Attached {
  HeartbeatMonitor monitor;
  std::string path;
  explicit Attached(nanoseconds heartbeat_timeout = 1s) : monitor(heartbeat_timeout), path(monitor.create(0)) {
    setenv(CXXRUN_HEARTBEAT_ENV, path.c_str(), 1);
    REQUIRE(cxxrun_heartbeat_init() == 0);
  }
  ~Attached() {
    cxxrun_heartbeat_shutdown();
    unsetenv(CXXRUN_HEARTBEAT_ENV);
  }
};

}  // namespace

TEST_CASE("heartbeat calls do nothing outside cxxrun") {
  unsetenv(CXXRUN_HEARTBEAT_ENV);
  CHECK(cxxrun_heartbeat_init() == 0);
  cxxrun_heartbeat_beat();
  CHECK(cxxrun_section_begin("step", 1.0) == 1);
  cxxrun_section_end("step");
  cxxrun_step(12);
  cxxrun_heartbeat_shutdown();
}

TEST_CASE("heartbeat init refuses files that are not heartbeat pages") {
  char tmpl[] = "/tmp/cxxrun_hb_test_XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, CXXRUN_HEARTBEAT_PAGE_SIZE) == 0);  // zeroes: no magic
  close(fd);
  setenv(CXXRUN_HEARTBEAT_ENV, tmpl, 1);
  errno = 0;
  CHECK(cxxrun_heartbeat_init() == -1);
  CHECK(errno == EINVAL);
  REQUIRE(truncate(tmpl, 100) == 0);
  CHECK(cxxrun_heartbeat_init() == -1);
  CHECK(errno == EINVAL);
  unlink(tmpl);
  CHECK(cxxrun_heartbeat_init() == -1);
  CHECK(errno == ENOENT);
  CHECK(cxxrun_section_begin("step", 1.0) == 1);  // still off
  unsetenv(CXXRUN_HEARTBEAT_ENV);
}

TEST_CASE("monitor pages are fresh files, removed with the monitor") {
  std::string dir, first, second;
  {
    HeartbeatMonitor m(1s);
    dir = m.dir();
    first = m.create(3);
    CHECK(first.rfind(dir + "/", 0) == 0);
    std::ifstream in(first, std::ios::binary);
    cxxrun_heartbeat_page page{};
    REQUIRE(in.read(reinterpret_cast<char*>(&page), sizeof page));
    CHECK(page.magic == CXXRUN_HEARTBEAT_MAGIC);
    CHECK(page.version == CXXRUN_HEARTBEAT_VERSION);
    CHECK(page.section_count == CXXRUN_HEARTBEAT_SECTIONS);
    CHECK(page.last_beat_ns == 0);
    second = m.create(3);  // the next attempt
    CHECK(second != first);
    CHECK_FALSE(file_exists(first));
    CHECK(file_exists(second));
    auto snap = m.snapshot(3);
    REQUIRE(snap);
    CHECK(snap->beats == 0);
    CHECK_FALSE(snap->since_last_beat);
    m.remove(3);
    CHECK_FALSE(file_exists(second));
    CHECK_FALSE(m.snapshot(3));
    m.create(4);
  }
  CHECK_FALSE(file_exists(dir));
}

TEST_CASE("a worker that never beats is not judged") {
  Attached w(1s);
  CHECK(w.monitor.check(now() + 3600s).empty());
}

TEST_CASE("beats arm the heartbeat timeout") {
  Attached w(1s);
  cxxrun_heartbeat_beat();
  cxxrun_heartbeat_beat();
  const nanoseconds t = now();
  CHECK(w.monitor.check(t).empty());
  CHECK(w.monitor.check(t + 500ms).empty());
  auto v = w.monitor.check(t + 3s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].local_rank == 0);
  CHECK(v[0].kind == HeartbeatViolation::Kind::heartbeat);
  CHECK(v[0].what == "heartbeat");
  CHECK(v[0].limit == 1s);
  CHECK(v[0].overdue >= 2s);
  CHECK(v[0].overdue < 2500ms);  // t was read right after the beats
  auto snap = w.monitor.snapshot(0, t);
  REQUIRE(snap);
  CHECK(snap->beats == 2);
  CHECK(snap->pid == getpid());
  REQUIRE(snap->since_last_beat);
  CHECK(*snap->since_last_beat < 500ms);
  cxxrun_heartbeat_beat();  // a late beat clears it
  CHECK(w.monitor.check(now() + 500ms).empty());
}

TEST_CASE("heartbeat timeout 0 leaves beats unjudged") {
  Attached w(0s);
  cxxrun_heartbeat_beat();
  CHECK(w.monitor.check(now() + 3600s).empty());
}

TEST_CASE("a section is judged by its own timeout until it ends") {
  Attached w(0s);
  REQUIRE(cxxrun_section_begin("all_reduce", 2.0) == 0);
  const nanoseconds t = now();
  CHECK(w.monitor.check(t + 1s).empty());
  auto v = w.monitor.check(t + 3s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].kind == HeartbeatViolation::Kind::section);
  CHECK(v[0].what == "all_reduce");
  CHECK(v[0].limit == 2s);
  CHECK(v[0].overdue >= 1s);
  CHECK(v[0].overdue < 1500ms);
  cxxrun_section_end("all_reduce");
  CHECK(w.monitor.check(t + 3s).empty());
}

TEST_CASE("sections without a timeout are shown but never judged") {
  Attached w(0s);
  REQUIRE(cxxrun_section_begin("load", 0) == 0);
  CHECK(w.monitor.check(now() + 3600s).empty());
  auto snap = w.monitor.snapshot(0);
  REQUIRE(snap);
  REQUIRE(snap->sections.size() == 1);
  CHECK(snap->sections[0].name == "load");
  CHECK(snap->sections[0].timeout == 0s);
}

TEST_CASE("sections nest and equal names end innermost first") {
  Attached w(0s);
  REQUIRE(cxxrun_section_begin("epoch", 100) == 0);
  REQUIRE(cxxrun_section_begin("step", 1) == 0);
  std::this_thread::sleep_for(1ms);
  REQUIRE(cxxrun_section_begin("step", 50) == 0);
  cxxrun_section_end("no such section");
  cxxrun_section_end("step");
  auto snap = w.monitor.snapshot(0);
  REQUIRE(snap);
  REQUIRE(snap->sections.size() == 2);
  for (const auto& s : snap->sections) CHECK(s.timeout == (s.name == "step" ? 1s : 100s));
  auto v = w.monitor.check(now() + 2s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].what == "step");
  cxxrun_section_end("step");
  cxxrun_section_end("epoch");
  CHECK(w.monitor.snapshot(0)->sections.empty());
}

TEST_CASE("section names are cut to fit the page") {
  Attached w(0s);
  const std::string long_name(100, 'n');
  REQUIRE(cxxrun_section_begin(long_name.c_str(), 1) == 0);
  auto v = w.monitor.check(now() + 2s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].what == std::string(CXXRUN_HEARTBEAT_NAME_MAX - 1, 'n'));
  cxxrun_section_end(long_name.c_str());
  CHECK(w.monitor.check(now() + 2s).empty());
}

TEST_CASE("section slots run out and free up again") {
  Attached w(0s);
  for (int i = 0; i < CXXRUN_HEARTBEAT_SECTIONS; ++i)
    REQUIRE(cxxrun_section_begin(("s" + std::to_string(i)).c_str(), 10) == 0);
  errno = 0;
  CHECK(cxxrun_section_begin("one more", 10) == -1);
  CHECK(errno == ENOSPC);
  cxxrun_section_end("s7");
  CHECK(cxxrun_section_begin("one more", 10) == 0);
  CHECK(w.monitor.snapshot(0)->sections.size() == CXXRUN_HEARTBEAT_SECTIONS);
}

TEST_CASE("threads open and close sections while the monitor reads") {
  Attached w(0s);
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failed] {
      const std::string name = "thread" + std::to_string(t);
      for (int i = 0; i < 20000; ++i) {
        if (cxxrun_section_begin(name.c_str(), 100) != 0) failed = true;
        cxxrun_heartbeat_beat();
        cxxrun_section_end(name.c_str());
      }
    });
  for (int i = 0; i < 2000; ++i) {
    auto snap = w.monitor.snapshot(0);
    REQUIRE(snap);
    CHECK(snap->sections.size() <= 4);
    for (const auto& s : snap->sections) CHECK(s.name.rfind("thread", 0) == 0);
  }
  for (auto& t : threads) t.join();
  CHECK_FALSE(failed);
  auto snap = w.monitor.snapshot(0);
  CHECK(snap->sections.empty());
  CHECK(snap->beats == 4 * 20000);
}

TEST_CASE("the monitor reads the step a worker reported, which is no beat") {
  Attached w(1s);
  auto snap = w.monitor.snapshot(0);
  REQUIRE(snap);
  CHECK_FALSE(snap->step);  // nothing reported yet: not step 0
  CHECK_FALSE(snap->since_step);
  cxxrun_step(0);
  snap = w.monitor.snapshot(0);
  REQUIRE(snap->step);
  CHECK(*snap->step == 0);
  cxxrun_step(UINT64_MAX);
  CHECK(*w.monitor.snapshot(0)->step == UINT64_MAX);
  cxxrun_step(30);  // a restart from a checkpoint goes back
  const nanoseconds t = now();
  snap = w.monitor.snapshot(0, t);
  CHECK(*snap->step == 30);
  REQUIRE(snap->since_step);
  CHECK(*snap->since_step < 500ms);
  // Steps are not beats: the heartbeat judge stays unarmed.
  CHECK(snap->beats == 0);
  CHECK_FALSE(snap->since_last_beat);
  CHECK(w.monitor.check(t + 3600s).empty());
}

// The agent's side of the Python package (agent/python/cxxrun/): what a
// Python worker writes, the monitor reads at the offsets of
// common/heartbeat_layout.h.
TEST_CASE("the monitor reads what Python's cxxrun package wrote") {
  HeartbeatMonitor monitor(1s);
  const std::string path = monitor.create(1);
  const std::string python_path = std::string("PYTHONPATH=") + CXXRUN_PYTHON_DIR;
  const std::string page = std::string(CXXRUN_HEARTBEAT_ENV) + "=" + path;
  const char* code =
      "import os, cxxrun\n"
      "assert cxxrun.enabled()\n"
      "cxxrun.heartbeat()\n"
      "cxxrun.step(7)\n"
      "cxxrun.step(41 + 1)\n"
      "with cxxrun.section('outer', timeout=60):\n"
      "    cxxrun.section('load', 2.5).__enter__()\n"
      "    os._exit(0)\n";  // dies inside both, as a killed worker would
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char* const argv[] = {const_cast<char*>(CXXRUN_PYTHON), const_cast<char*>("-c"), const_cast<char*>(code),
                          nullptr};
    char* const envp[] = {const_cast<char*>(python_path.c_str()), const_cast<char*>(page.c_str()),
                          const_cast<char*>("PYTHONDONTWRITEBYTECODE=1"), nullptr};  // no .pyc in the source tree
    execve(CXXRUN_PYTHON, argv, envp);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  auto snap = monitor.snapshot(1);
  REQUIRE(snap);
  CHECK(snap->pid == child);
  CHECK(snap->beats == 1);
  CHECK(snap->since_last_beat);
  REQUIRE(snap->step);
  CHECK(*snap->step == 42);
  REQUIRE(snap->sections.size() == 2);
  CHECK(snap->sections[0].name == "outer");
  CHECK(snap->sections[0].timeout == 60s);
  CHECK(snap->sections[1].name == "load");
  CHECK(snap->sections[1].timeout == 2500ms);
  auto v = monitor.check(now() + 3s);
  REQUIRE(v.size() == 2);
  CHECK(v[0].what == "heartbeat");
  CHECK(v[1].what == "load");
}

TEST_CASE("a page written by another process is read by the monitor") {
  HeartbeatMonitor monitor(1s);
  const std::string path = monitor.create(2);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    setenv(CXXRUN_HEARTBEAT_ENV, path.c_str(), 1);
    bool ok = cxxrun_heartbeat_init() == 0;
    cxxrun_heartbeat_beat();
    ok = ok && cxxrun_section_begin("hung_collective", 0.5) == 0;
    _exit(ok ? 0 : 1);  // dies inside the section, as a killed worker would
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  auto snap = monitor.snapshot(2);
  REQUIRE(snap);
  CHECK(snap->pid == child);
  CHECK(snap->beats == 1);
  REQUIRE(snap->sections.size() == 1);
  CHECK(snap->sections[0].name == "hung_collective");
  auto v = monitor.check(now() + 2s);
  REQUIRE(v.size() == 2);
  CHECK(v[0].what == "heartbeat");
  CHECK(v[1].what == "hung_collective");
  CHECK(v[1].local_rank == 2);
}

TEST_CASE("a child forked by the worker does not beat for it") {
  Attached w(1s);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    cxxrun_heartbeat_beat();
    _exit(cxxrun_section_begin("child", 1) == 1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(w.monitor.snapshot(0)->beats == 0);
  CHECK(w.monitor.snapshot(0)->sections.empty());
}

TEST_CASE("violations describe themselves for the log") {
  HeartbeatViolation hb{1, HeartbeatViolation::Kind::heartbeat, "heartbeat", 10s, 2300ms};
  CHECK(describe(hb) == "local rank 1: no heartbeat for 12.3 s (timeout 10.0 s)");
  HeartbeatViolation sec{0, HeartbeatViolation::Kind::section, "step", 30s, 10200ms};
  CHECK(describe(sec) == "local rank 0: section 'step' open for 40.2 s (timeout 30.0 s)");
}

TEST_CASE("heartbeat monitor: --section-timeout is judged there too, and the earlier limit counts") {
  // One judge for every limit: a section's own timeout and the command
  // line's for its name (before, the watchdog judged the latter again, in
  // a message of its own).
  HeartbeatMonitor monitor(0s, "", {{"step", 2s}, {"load", 10s}});
  const std::string path = monitor.create(0);
  setenv(CXXRUN_HEARTBEAT_ENV, path.c_str(), 1);
  REQUIRE(cxxrun_heartbeat_init() == 0);
  REQUIRE(cxxrun_section_begin("step", 0) == 0);    // declares none: the flag's 2 s
  REQUIRE(cxxrun_section_begin("load", 5.0) == 0);  // declares 5 s, earlier than the flag's 10 s
  const nanoseconds t = now();
  CHECK(monitor.check(t + 1s).empty());
  auto v = monitor.check(t + 3s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].what == "step");
  CHECK(v[0].limit == 2s);
  CHECK(v[0].from_flag);
  CHECK_THAT(describe(v[0]), Catch::StartsWith("local rank 0: section 'step' open for 3.") &&
                                 Catch::EndsWith("(--section-timeout 2.0 s)"));
  v = monitor.check(t + 6s);
  REQUIRE(v.size() == 2);
  const auto& load = v[0].what == "load" ? v[0] : v[1];
  CHECK(load.limit == 5s);
  CHECK_FALSE(load.from_flag);
  cxxrun_heartbeat_shutdown();
  unsetenv(CXXRUN_HEARTBEAT_ENV);
}
