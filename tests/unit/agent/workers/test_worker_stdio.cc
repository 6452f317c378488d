// A worker's stdio ends: pipes, or ptys that pass bytes unchanged (--tty),
// and which streams get a pty under each --tty value.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "agent/workers/worker_stdio.h"

using namespace cxxrun::agent;

namespace {

// Everything until the stream ends: EOF (a pipe) or EIO (a pty whose slave
// every holder closed). Each wait is bounded, so a stream that never ends
// fails the test instead of hanging it.
std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, n);
      continue;
    }
    if (n == 0 || errno == EIO) return out;
    if (errno == EINTR) continue;
    REQUIRE(errno == EAGAIN);
    pollfd p{fd, POLLIN, 0};
    REQUIRE(poll(&p, 1, 10000) == 1);
  }
}

// Forks a child that runs `body` with the worker's ends as its fds 1 and 2,
// as spawn_process would give them; the agent's copies of those ends are
// closed at once, as WorkerGroup does. Returns the two streams' bytes.
template <typename Body>
std::pair<std::string, std::string> run_worker(WorkerStdio s, Body body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(s.out_write, STDOUT_FILENO);
    dup2(s.err_write, STDERR_FILENO);
    body();
    _exit(0);
  }
  close_write_ends(s);
  std::string out = read_to_end(s.out_read);
  std::string err = read_to_end(s.err_read);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  close_all(s);
  return {out, err};
}

void say(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) _exit(3);
    done += n;
  }
}

void say_isatty() {
  say(STDOUT_FILENO, isatty(STDOUT_FILENO) ? "out:tty " : "out:pipe ");
  say(STDERR_FILENO, isatty(STDERR_FILENO) ? "err:tty" : "err:pipe");
}

Config config(Tty tty) {
  Config c;
  c.tty = tty;
  return c;
}

const Console kTerminal{true, {40, 100}};
const Console kPipe{};

}  // namespace

TEST_CASE("pipes by default: the worker's isatty is false") {
  auto [out, err] = run_worker(open_worker_stdio(), say_isatty);
  CHECK(out == "out:pipe ");
  CHECK(err == "err:pipe");
}

TEST_CASE("a pty passes the worker's bytes unchanged, and the worker sees a terminal") {
  auto [out, err] = run_worker(open_worker_stdio({true, true, {}, {}}), [] {
    say_isatty();
    say(STDOUT_FILENO, "a\nb");
    say(STDERR_FILENO, "\r50%\x1b[0m\n");
  });
  // No ONLCR ("\n" -> "\r\n"), and each stream is its own terminal, so
  // stderr stays apart for the failure summary's tail.
  CHECK(out == "out:tty a\nb");
  CHECK(err == "err:tty\r50%\x1b[0m\n");
}

TEST_CASE("a pty hands over everything written before its writer exited") {
  // More than a pty's buffer holds: the writer blocks until the agent reads,
  // and its last bytes are still there after it exited.
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += "line " + std::to_string(i) + "\n";
  auto [out, err] = run_worker(open_worker_stdio({true, false, {}, {}}), [&] { say(STDOUT_FILENO, lines); });
  CHECK(out.size() == lines.size());
  CHECK(out == lines);
  CHECK(err.empty());
}

TEST_CASE("one stream can be a pty and the other a pipe") {
  auto [out, err] = run_worker(open_worker_stdio({false, true, {}, {}}), say_isatty);
  CHECK(out == "out:pipe ");
  CHECK(err == "err:tty");
}

TEST_CASE("a pty is raw and carries the size it was given") {
  WorkerStdio s = open_worker_stdio({true, true, {24, 69}, {}});
  termios t{};
  REQUIRE(tcgetattr(s.out_write, &t) == 0);
  CHECK((t.c_oflag & OPOST) == 0);
  CHECK((t.c_lflag & (ECHO | ICANON | ISIG)) == 0);
  winsize ws{};
  REQUIRE(ioctl(s.out_write, TIOCGWINSZ, &ws) == 0);
  CHECK(ws.ws_row == 24);
  CHECK(ws.ws_col == 69);
  REQUIRE(ioctl(s.err_write, TIOCGWINSZ, &ws) == 0);
  CHECK(ws.ws_col == 0);  // none given: unknown, as for a terminal nobody sized
  struct stat st {};
  REQUIRE(fstat(s.out_write, &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);  // no wall(1) into a worker's output
  // The agent's ends: non-blocking and close-on-exec, as a pipe's are.
  CHECK((fcntl(s.out_read, F_GETFL) & O_NONBLOCK) != 0);
  CHECK((fcntl(s.out_read, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((fcntl(s.out_write, F_GETFD) & FD_CLOEXEC) != 0);
  close_all(s);
}

TEST_CASE("tty never: pipes, even on a terminal") {
  StdioRequest r = stdio_request(config(Tty::never), 0, 0, kTerminal, kTerminal);
  CHECK_FALSE(r.out_tty);
  CHECK_FALSE(r.err_tty);
}

TEST_CASE("tty always: ptys, even without a terminal") {
  Config c = config(Tty::always);
  c.redirects.all = Std::all;  // shown nowhere, and still a terminal
  StdioRequest r = stdio_request(c, 0, 0, kPipe, kPipe);
  CHECK(r.out_tty);
  CHECK(r.err_tty);
  CHECK(r.out_size.cols == 0);
}

TEST_CASE("tty auto: a pty for each stream shown on a terminal") {
  Config c = config(Tty::auto_);
  StdioRequest r = stdio_request(c, 0, 0, kTerminal, kTerminal);
  CHECK(r.out_tty);
  CHECK(r.err_tty);
  // "[default0]:" takes 11 of the terminal's 100 columns.
  CHECK(r.out_size.cols == 89);
  CHECK(r.out_size.rows == 40);

  // Each stream by its own console, as a torchrun worker inherits them.
  r = stdio_request(c, 0, 0, kPipe, kTerminal);
  CHECK_FALSE(r.out_tty);
  CHECK(r.err_tty);
  r = stdio_request(c, 0, 0, kPipe, kPipe);
  CHECK_FALSE(r.out_tty);
  CHECK_FALSE(r.err_tty);

  SECTION("a rank filtered out of the console gets pipes") {
    c.local_ranks_filter = {1};
    CHECK_FALSE(stdio_request(c, 0, 0, kTerminal, kTerminal).out_tty);
    CHECK(stdio_request(c, 1, 1, kTerminal, kTerminal).out_tty);
  }
  SECTION("a redirected stream gets a pipe; a teed one is shown, so a pty") {
    c.redirects.all = Std::out;
    c.tee.all = Std::err;
    r = stdio_request(c, 0, 0, kTerminal, kTerminal);
    CHECK_FALSE(r.out_tty);
    CHECK(r.err_tty);
  }
  SECTION("the prefix template sets how much of the line the worker gets") {
    c.log_line_prefix_template = "${rank}| ";
    // Local rank 2 of a node whose ranks start at 10.
    CHECK(stdio_request(c, 2, 12, kTerminal, kTerminal).out_size.cols == 96);  // "12| "
  }
}
