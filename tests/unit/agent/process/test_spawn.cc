// A spawn in two halves (agent/process/spawn.h): begin_spawn returns while
// the child is still on its way to exec, so a group's starts overlap, and
// finish_spawn is where its exec, or why it failed, is known.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "agent/process/spawn.h"

using namespace cxxrun::agent;

namespace {

// The write end of a pipe that is full: a child's write of one byte to it
// (what it does to join a memory cgroup) blocks until `read_fd` is read.
struct FullPipe {
  int read_fd = -1, write_fd = -1;
  FullPipe() {
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    read_fd = fds[0], write_fd = fds[1];
    fcntl(write_fd, F_SETFL, O_NONBLOCK);
    char chunk[4096] = {};
    while (write(write_fd, chunk, sizeof chunk) > 0) {
    }
    while (write(write_fd, chunk, 1) > 0) {
    }
    fcntl(write_fd, F_SETFL, 0);  // the child's write blocks
  }
  void drain() {
    fcntl(read_fd, F_SETFL, O_NONBLOCK);
    char chunk[4096];
    while (read(read_fd, chunk, sizeof chunk) > 0) {
    }
  }
  ~FullPipe() { close(read_fd), close(write_fd); }
};

int exit_status(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("begin_spawn returns before the child's exec; finish_spawn waits for it") {
  FullPipe blocked;
  SpawnRequest r;
  r.argv = {"true"};
  r.envp = {"PATH=/usr/bin:/bin"};
  r.stdout_fd = STDOUT_FILENO;
  r.stderr_fd = STDERR_FILENO;
  r.memory_procs = blocked.write_fd;  // the child waits here, before its exec
  // Bounded: a begin_spawn that waited for the exec would wait for ever,
  // so a second thread lets the child go after 20 s and says it had to.
  // begin_spawn runs on this thread: the child dies with the thread that
  // forked it (PR_SET_PDEATHSIG).
  std::promise<void> returned;
  std::future<void> done = returned.get_future();
  std::atomic<bool> rescued{false};
  std::thread rescue([&] {
    if (done.wait_for(std::chrono::seconds(20)) == std::future_status::ready) return;
    rescued = true;
    blocked.drain();
  });
  PendingSpawn pending = begin_spawn(r);
  returned.set_value();
  rescue.join();
  CHECK_FALSE(rescued);
  blocked.drain();  // the child goes on to its exec
  REQUIRE(pending.pid > 0);
  CHECK(finish_spawn(pending) == pending.pid);
  CHECK(pending.report == -1);
  CHECK(exit_status(pending.pid) == 0);
}

TEST_CASE("finish_spawn throws what the child could not execute, naming it") {
  SpawnRequest r;
  r.argv = {"/nonexistent/cxxrun-test-program"};
  r.envp = {};
  r.stdout_fd = STDOUT_FILENO;
  r.stderr_fd = STDERR_FILENO;
  PendingSpawn pending = begin_spawn(r);
  REQUIRE(pending.pid > 0);
  CHECK_THROWS_WITH(finish_spawn(pending), Catch::Contains("cannot execute '/nonexistent/cxxrun-test-program'"));
  CHECK(exit_status(pending.pid) == 127);
}

TEST_CASE("several begun spawns finish in any order") {
  SpawnRequest r;
  r.argv = {"true"};
  r.envp = {"PATH=/usr/bin:/bin"};
  r.stdout_fd = STDOUT_FILENO;
  r.stderr_fd = STDERR_FILENO;
  PendingSpawn a = begin_spawn(r), b = begin_spawn(r), c = begin_spawn(r);
  CHECK(finish_spawn(c) == c.pid);
  CHECK(finish_spawn(a) == a.pid);
  CHECK(finish_spawn(b) == b.pid);
  for (pid_t pid : {a.pid, b.pid, c.pid}) CHECK(exit_status(pid) == 0);
}
