// The guardian (agent/process/guardian.h) removes the temporary directories
// it made for an agent that dies, at any moment, and leaves them to an agent
// that exits normally. Each case forks an "agent" that starts a guardian.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "agent/process/guardian.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

namespace {

// Runs `agent` in a child that starts its own guardian; returns the line it
// wrote to its pipe (the directory it got) once the child has ended.
template <typename Agent>
std::string in_an_agent(Agent agent) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    agent(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return said;
}

void say(int fd, const std::string& text) { (void)!write(fd, text.data(), text.size()); }

// Bounded: the guardian is a process of its own, scheduled when it is.
bool gone_within(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (fs::exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !fs::exists(path);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

struct Base {
  std::string path;
  Base() {
    path = (fs::temp_directory_path() / "guardian-test-XXXXXX").string();
    REQUIRE(mkdtemp(path.data()) != nullptr);
  }
  ~Base() { fs::remove_all(path); }
};

const std::string kToken = "CXXRUN_JOB_TOKEN=guardian-unit-test-" + std::to_string(getpid()) + ":";

}  // namespace

TEST_CASE("guardian: a directory it made goes with an agent killed the moment it has it", "[guardian]") {
  Base base;
  const std::string made = in_an_agent([&](int out) {
    Guardian guardian(kToken);
    say(out, guardian.make_temp_dir(base.path + "/hook-XXXXXX"));
    raise(SIGKILL);
  });
  REQUIRE(made.rfind(base.path + "/hook-", 0) == 0);
  CHECK(gone_within(made, std::chrono::seconds(30)));
}

TEST_CASE("guardian: at a normal exit its directories are left to the agent", "[guardian]") {
  Base base;
  const std::string made = in_an_agent([&](int out) {
    Guardian guardian(kToken);
    const std::string dir = guardian.make_temp_dir(base.path + "/hook-XXXXXX");
    guardian.release();
    say(out, dir);
  });
  REQUIRE(!made.empty());
  CHECK(fs::is_directory(made));
}

TEST_CASE("guardian: one that does not answer leaves the agent to make it, and nothing behind", "[guardian]") {
  Base base;
  const std::string made = in_an_agent([&](int out) {
    Guardian guardian(kToken);
    kill(guardian.pid(), SIGSTOP);
    const std::string dir = guardian.make_temp_dir(base.path + "/hook-XXXXXX");  // after kAnswerLimit
    say(out, dir);
    kill(guardian.pid(), SIGCONT);
    raise(SIGKILL);
  });
  REQUIRE(fs::path(made).parent_path() == base.path);
  // The one it made itself, and the one the guardian made too late.
  CHECK(gone_within(made, std::chrono::seconds(30)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!entries(base.path).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(entries(base.path).empty());
}

TEST_CASE("guardian: a template mkdtemp refuses comes back as errno", "[guardian]") {
  Base base;
  const std::string said = in_an_agent([&](int out) {
    Guardian guardian(kToken);
    errno = 0;
    const std::string dir = guardian.make_temp_dir(base.path + "/missing/hook-XXXXXX");
    say(out, dir.empty() ? std::to_string(errno) : dir);
    guardian.release();
  });
  CHECK(said == std::to_string(ENOENT));
}
