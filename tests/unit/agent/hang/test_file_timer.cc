#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "agent/hang/file_timer.h"

using cxxrun::agent::FileTimerServer;
using cxxrun::agent::TimerExpiry;

namespace {

bool is_fifo(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// A client as torch's FileTimerClient is: open, write, close.
void send(const std::string& path, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
}

std::string request(int pid, const std::string& scope, double expiration, int signal) {
  return "{\"version\": 1, \"pid\": " + std::to_string(pid) + ", \"scope_id\": \"" + scope +
         "\", \"expiration_time\": " + std::to_string(expiration) + ", \"signal\": " + std::to_string(signal) + "}\n";
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

}  // namespace

TEST_CASE("file timer makes a private FIFO and removes it") {
  std::string path;
  {
    FileTimerServer server;
    path = server.path();
    CHECK(is_fifo(path));
    CHECK(path.find("/watchdog_timer_") != std::string::npos);
    CHECK_FALSE(readable(server.fd()));  // no EOF without clients
    send(path, request(10, "a", 100, 9));
    send(path, request(11, "b", 100, 9));
    CHECK(readable(server.fd()));
    server.on_readable();
    CHECK(server.active() == 2);
    CHECK_FALSE(readable(server.fd()));  // both clients closed: still no EOF
  }
  CHECK_FALSE(exists(path));
  CHECK_FALSE(exists(path.substr(0, path.rfind('/'))));
}

TEST_CASE("file timer: its own FIFO is never in a TMPDIR others can replace") {
  char shared[] = "/tmp/cxxrun_ft_shared_XXXXXX";
  REQUIRE(mkdtemp(shared));
  REQUIRE(chmod(shared, 0777) == 0);  // writable by all, no sticky bit
  const char* old = getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", shared, 1);
  std::string path;
  {
    FileTimerServer server;
    path = server.path();
  }
  if (old)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  rmdir(shared);
  CHECK(path.rfind(std::string(shared) + "/", 0) != 0);
  CHECK(path.rfind("/tmp/cxxrun_timer_", 0) == 0);
}

TEST_CASE("file timer replaces a file at a given path") {
  char dir[] = "/tmp/cxxrun_ft_test_XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/timer";
  std::ofstream(path) << "stale";
  {
    FileTimerServer server(path);
    CHECK(server.path() == path);
    CHECK(is_fifo(path));
  }
  CHECK_FALSE(exists(path));
  rmdir(dir);
}

TEST_CASE("file timer is on only with TORCHELASTIC_ENABLE_FILE_TIMER=1") {
  CHECK_FALSE(FileTimerServer::from_environment({}));
  CHECK_FALSE(FileTimerServer::from_environment({{"TORCHELASTIC_ENABLE_FILE_TIMER", "0"}}));
  auto server = FileTimerServer::from_environment({{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}});
  REQUIRE(server);
  CHECK(is_fifo(server->path()));
  char dir[] = "/tmp/cxxrun_ft_test_XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/given";
  {
    auto given = FileTimerServer::from_environment(
        {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", path}});
    REQUIRE(given);
    CHECK(given->path() == path);
  }
  rmdir(dir);
}

TEST_CASE("file timer reports expired scopes once") {
  FileTimerServer server;
  send(server.path(), request(100, "step", 50, 9) + request(200, "load", 80, 15));
  server.on_readable();
  CHECK(server.expired(49.9).empty());
  auto e = server.expired(60);
  REQUIRE(e.size() == 1);
  CHECK(e[0].pid == 100);
  CHECK(e[0].scope_id == "step");
  CHECK(e[0].signal == 9);
  CHECK(e[0].expiration_time == 50);
  CHECK(server.expired(60).empty());
  e = server.expired(1e9);
  REQUIRE(e.size() == 1);
  CHECK(e[0].pid == 200);
  CHECK(e[0].signal == 15);
  CHECK(server.active() == 0);
}

TEST_CASE("file timer release and re-arm follow torch") {
  FileTimerServer server;
  send(server.path(), request(100, "step", 50, 9));
  send(server.path(), request(100, "step", -1, 0));  // release
  send(server.path(), request(100, "other", -1, 0));  // releasing nothing is fine
  server.on_readable();
  CHECK(server.active() == 0);
  CHECK(server.expired(1e9).empty());
  send(server.path(), request(100, "step", 50, 9) + request(100, "step", 70, 9));  // same scope: replaced
  server.on_readable();
  CHECK(server.active() == 1);
  CHECK(server.expired(60).empty());
  CHECK(server.expired(70).size() == 1);
}

TEST_CASE("file timer picks one expiry per pid and drops its other timers") {
  FileTimerServer server;
  send(server.path(), request(100, "no_signal", 10, 0) + request(100, "kill", 20, 9) + request(100, "later", 500, 9) +
                          request(300, "only_report", 10, 0));
  server.on_readable();
  auto e = server.expired(30);
  REQUIRE(e.size() == 2);
  CHECK(e[0].pid == 300);  // earliest first
  CHECK(e[0].signal == 0);
  CHECK(e[1].pid == 100);
  CHECK(e[1].scope_id == "kill");  // the earliest with a signal > 0
  CHECK(server.active() == 0);     // "later" went with its pid
}

TEST_CASE("file timer joins lines split across writes") {
  FileTimerServer server;
  const std::string line = request(42, "split", 5, 9);
  int fd = open(server.path().c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, line.data(), 17) == 17);
  server.on_readable();
  CHECK(server.active() == 0);
  REQUIRE(write(fd, line.data() + 17, line.size() - 17) == static_cast<ssize_t>(line.size() - 17));
  close(fd);
  server.on_readable();
  REQUIRE(server.active() == 1);
  auto e = server.expired(6);
  REQUIRE(e.size() == 1);
  CHECK(e[0].scope_id == "split");
}

TEST_CASE("file timer skips malformed requests and keeps the good ones") {
  FileTimerServer server;
  send(server.path(),
       "not json\n"
       "[1, 2]\n"
       "{\"pid\": \"12\", \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}\n"
       "{\"pid\": 12, \"expiration_time\": 1, \"signal\": 9}\n"
       "{\"pid\": 0, \"scope_id\": \"group\", \"expiration_time\": 1, \"signal\": 9}\n"
       "{\"pid\": -1, \"scope_id\": \"all\", \"expiration_time\": 1, \"signal\": 9}\n"
       "{\"pid\": 12, \"scope_id\": \"s\", \"expiration_time\": Infinity, \"signal\": 9}\n"
       "\n" +
           request(7, "good", 1, 9) + "{\"truncated\": ");
  server.on_readable();
  CHECK(server.active() == 1);
  auto e = server.expired(2);
  REQUIRE(e.size() == 1);
  CHECK(e[0].pid == 7);
}

TEST_CASE("file timer drops an endless line and recovers") {
  FileTimerServer server;
  int fd = open(server.path().c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  const std::string junk(4096, 'x');
  for (int i = 0; i < 20; ++i) {  // 80 KiB without a newline, drained as it comes
    REQUIRE(write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
    server.on_readable();
  }
  const std::string tail = "\n" + request(8, "after", 1, 9);
  REQUIRE(write(fd, tail.data(), tail.size()) == static_cast<ssize_t>(tail.size()));
  close(fd);
  server.on_readable();
  CHECK(server.active() == 1);
}

TEST_CASE("file timer forgets the timers of an exited pid") {
  FileTimerServer server;
  send(server.path(), request(5, "a", 1, 9) + request(5, "b", 1, 9) + request(6, "c", 1, 9));
  server.on_readable();
  server.forget(5);
  CHECK(server.active() == 1);
  server.clear();
  CHECK(server.expired(1e9).empty());
}
