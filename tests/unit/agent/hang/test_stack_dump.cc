// The stack collector signals only a process whose hook can still take the
// stack (agent/hang/stack_hook.h), and writes the hang bundle only into a
// directory it made (agent/hang/stack_dump.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/config.h"
#include "agent/workers/log_dir.h"
#include "agent/hang/stack_dump.h"
#include "agent/hang/stack_hook.h"
#include "agent/process/process_tree.h"
#include "temp_tree.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

namespace {

// A child that waits, with the stack signal at its default action: the
// signal would end it.
struct Sleeper {
  pid_t pid = 0;
  Sleeper() {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      signal(stack_signal(), SIG_DFL);
      for (int i = 0; i < 600; ++i) sleep(1);
      _exit(0);
    }
  }
  // Still running (not ended by a signal).
  bool alive() {
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == 0;
  }
  ~Sleeper() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

std::string registration(pid_t pid, unsigned long long start, int fd) {
  return "cxxrun: stack dump on signal " + std::to_string(stack_signal()) + " for pid " + std::to_string(pid) +
         "\ncxxrun: pid " + std::to_string(pid) + " started at " + std::to_string(start) + " dumps to fd " +
         std::to_string(fd) + "\n";
}

struct Collected {
  std::map<int, std::string> stacks;
  std::string bundle;
};

Collected collect(const LogDir& logs, pid_t worker) {
  boost::asio::io_context io;
  StackDump dump(io, logs);
  Collected got;
  bool done = false;
  dump.collect(0, {{0, 0, worker}}, [&](std::map<int, std::string> stacks, const std::string& bundle) {
    got = {std::move(stacks), bundle};
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) io.run_for(std::chrono::milliseconds(50));
  REQUIRE(done);
  return got;
}

Config job_in(const std::string& dir) {
  Config c;
  c.log_dir = dir;
  c.run_id = "job";
  return c;
}

}  // namespace

TEST_CASE("the hook's registrations are read with where they started and write", "[stack_dump]") {
  const auto regs = hook_registrations(registration(42, 1234, 517) + "Current thread 0x1 (most recent call first):\n" +
                                       registration(43, 99, 3) + "cxxrun: stack dump off for pid 43 (the program set its own handler)\n");
  REQUIRE(regs.size() == 2);
  CHECK(regs[0].pid == 42);
  CHECK(regs[0].start == 1234);
  CHECK(regs[0].fd == 517);
  CHECK_FALSE(regs[0].off);
  CHECK(regs[1].pid == 43);
  CHECK(regs[1].off);
}

TEST_CASE("a registered pid that is no longer the job's process is never signalled", "[stack_dump]") {
  TempDir tmp;
  LogDir logs(job_in(tmp.path));
  logs.prepare_attempt(0, 1);
  Sleeper worker;    // the worker, whose Python helper registered and exited
  Sleeper stranger;  // the process that got the helper's pid: not the job's
  const std::string file = logs.file(0, 0, "stacks.txt");
  const unsigned long long start = process_start_time(stranger.pid);
  REQUIRE(start > 0);

  SECTION("recycled: same pid, another start time") {
    std::ofstream(file) << registration(stranger.pid, start - 1, 2);
    CHECK(why_not_signal(hook_registrations(registration(stranger.pid, start - 1, 2))[0], worker.pid, file)
              .find("no longer the process that registered") != std::string::npos);
  }
  SECTION("not in the worker's tree") {
    std::ofstream(file) << registration(stranger.pid, start, 2);
    CHECK(why_not_signal(hook_registrations(registration(stranger.pid, start, 2))[0], worker.pid, file)
              .find("not in worker pid") != std::string::npos);
  }
  SECTION("registered as an older hook did, without start time or descriptor") {
    std::ofstream(file) << "cxxrun: stack dump on signal " << stack_signal() << " for pid " << stranger.pid << "\n";
  }
  collect(logs, worker.pid);
  CHECK(stranger.alive());
  CHECK(worker.alive());
}

TEST_CASE("the hang bundle is never written through a planted link", "[stack_dump]") {
  TempDir tmp;
  LogDir logs(job_in(tmp.path));
  logs.prepare_attempt(0, 1);
  const std::string elsewhere = tmp.path + "/elsewhere";
  fs::create_directories(elsewhere);
  REQUIRE(symlink(elsewhere.c_str(), logs.attempt_file(0, "hang-0").c_str()) == 0);
  Sleeper worker;
  const Collected got = collect(logs, worker.pid);
  CHECK(fs::is_empty(elsewhere));
  CHECK(got.bundle == logs.attempt_file(0, "hang-1"));
  struct stat st {};
  REQUIRE(stat(got.bundle.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat((got.bundle + "/rank-0.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("a look at the stacks (cxxrunctl stacks) writes no bundle; a verdict that joins it does", "[stack_dump]") {
  TempDir tmp;
  LogDir logs(job_in(tmp.path));
  logs.prepare_attempt(0, 1);
  Sleeper worker;
  boost::asio::io_context io;
  StackDump dump(io, logs);
  auto run = [&](bool& done) {
    io.restart();  // a collection that ended left the loop out of work, stopped
    for (int i = 0; i < 200 && !done; ++i) io.run_for(std::chrono::milliseconds(50));
    REQUIRE(done);
  };
  bool looked = false;
  std::string look_bundle = "unset";
  std::map<int, std::string> seen;
  dump.collect(
      0, {{0, 0, worker.pid}},
      [&](std::map<int, std::string> stacks, const std::string& bundle) {
        seen = std::move(stacks);
        look_bundle = bundle;
        looked = true;
      },
      false);
  run(looked);
  CHECK(seen.count(0) == 1);
  CHECK(look_bundle.empty());
  CHECK_FALSE(fs::exists(logs.attempt_file(0, "hang-0")));
  CHECK(worker.alive());

  // A verdict during a look: it gets the bundle, numbered as the first hang; the look does not.
  bool both = false, verdict = false;
  std::string verdict_bundle, second_look = "unset";
  dump.collect(
      0, {{0, 0, worker.pid}}, [&](std::map<int, std::string>, const std::string& b) { second_look = b; }, false);
  dump.collect(0, {{0, 0, worker.pid}}, [&](std::map<int, std::string>, const std::string& b) {
    verdict_bundle = b;
    verdict = both = true;
  });
  run(both);
  CHECK(verdict);
  CHECK(second_look.empty());
  CHECK(verdict_bundle == logs.attempt_file(0, "hang-0"));
  CHECK(fs::exists(verdict_bundle + "/rank-0.txt"));
}

namespace {
volatile sig_atomic_t handled = 0;
void count(int) { handled = handled + 1; }
}  // namespace

TEST_CASE("a signalled hook that writes nothing is read from outside", "[stack_dump]") {
  // A process that registered as the hook does, then set a native handler of
  // its own (as C code may, past the hook's watch): the signal is caught, the
  // checks pass, nothing is written, and eu-stack takes the stack.
  TempDir tmp;
  LogDir logs(job_in(tmp.path));
  logs.prepare_attempt(0, 1);
  const std::string file = logs.file(0, 0, "stacks.txt");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    signal(stack_signal(), count);
    const std::string text = registration(getpid(), process_start_time(getpid()), fd);
    if (write(fd, text.data(), text.size()) < 0) _exit(1);
    if (write(ready[1], "x", 1) < 0) _exit(1);
    for (int i = 0; i < 600; ++i) sleep(1);
    _exit(0);
  }
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  const Collected got = collect(logs, child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  REQUIRE(got.stacks.count(0));
  if (access("/usr/bin/eu-stack", X_OK) == 0) CHECK(got.stacks.at(0).find("TID") != std::string::npos);
}

namespace {

// Whether `sig` waits in `pid`'s pending sets (/proc/<pid>/status SigPnd, ShdPnd).
bool signal_pending(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  bool pending = false;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
      pending = pending || ((std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1);
  return pending;
}

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t end = stat.rfind(')');
  return end == std::string::npos || end + 2 >= stat.size() ? '?' : stat[end + 2];
}

}  // namespace

TEST_CASE("a worker a signal stopped is read from outside and stays stopped", "[stack_dump]") {
  // Its hook could take the signal, but not while it is stopped: the signal
  // would wait until a SIGCONT (and dump then, into a later hang's reading).
  TempDir tmp;
  LogDir logs(job_in(tmp.path));
  logs.prepare_attempt(0, 1);
  const std::string file = logs.file(0, 0, "stacks.txt");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    signal(stack_signal(), count);
    const std::string text = registration(getpid(), process_start_time(getpid()), fd);
    if (write(fd, text.data(), text.size()) < 0) _exit(1);
    if (write(ready[1], "x", 1) < 0) _exit(1);
    for (int i = 0; i < 600; ++i) sleep(1);
    _exit(0);
  }
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  REQUIRE(kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, WUNTRACED) == child);
  REQUIRE(WIFSTOPPED(status));
  const Collected got = collect(logs, child);
  CHECK_FALSE(signal_pending(child, stack_signal()));
  CHECK(state_of(child) == 'T');  // eu-stack's detach left it stopped
  kill(child, SIGKILL);
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  REQUIRE(got.stacks.count(0));
  if (access("/usr/bin/eu-stack", X_OK) == 0) CHECK(got.stacks.at(0).find("TID") != std::string::npos);
}
