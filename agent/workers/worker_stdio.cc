#include "agent/workers/worker_stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "agent/hostname.h"
#include "agent/workers/output.h"

namespace cxxrun::agent {
namespace {

struct Ends {
  int read = -1;
  int write = -1;
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::runtime_error(what + ": " + strerror(error));
}

Ends open_pipe_ends() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) fail("cannot create pipes", errno);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return {p[0], p[1]};
}

Ends open_pty_ends(CellSize size, const char* stream) {
  const std::string what = std::string("cannot open a pseudo-terminal for a worker's ") + stream +
                           " (--tty=never gives it a pipe)";
  // O_NOCTTY: neither end may become the agent's controlling terminal.
  Ends e;
  e.read = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (e.read < 0) fail(what, errno);
  char name[128];
  if (grantpt(e.read) != 0 || unlockpt(e.read) != 0 || ptsname_r(e.read, name, sizeof name) != 0 ||
      (e.write = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    const int error = errno;
    close_fd(e.read);
    fail(what, error);
  }
  // grantpt leaves the tty group write access, so wall(1) and write(1)
  // could put text into a worker's output; only the worker writes here.
  // Best effort: the terminal works either way.
  (void)fchmod(e.write, S_IRUSR | S_IWUSR);
  // Raw: without OPOST the worker's "\n" stays "\n" (not "\r\n"), so the
  // console, the log files and the failure summary get its bytes unchanged;
  // the rest (echo, line editing, signal keys) concerns input, and nothing
  // is ever typed into this terminal.
  termios t{};
  bool ok = tcgetattr(e.write, &t) == 0;
  if (ok) {
    cfmakeraw(&t);
    ok = tcsetattr(e.write, TCSANOW, &t) == 0;
  }
  if (ok && (size.rows || size.cols)) {
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    ok = ioctl(e.read, TIOCSWINSZ, &ws) == 0;
  }
  if (!ok) {
    const int error = errno;
    close_fd(e.read);
    close_fd(e.write);
    fail(what, error);
  }
  return e;
}

Ends open_stream(bool tty, CellSize size, const char* stream) {
  return tty ? open_pty_ends(size, stream) : open_pipe_ends();
}

// Display columns of a prefix: UTF-8 code points (a prefix template with
// wide characters is rare enough not to weigh them).
unsigned columns_of(const std::string& s) {
  unsigned n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

CellSize narrowed(CellSize size, unsigned prefix) {
  if (size.cols > prefix) size.cols = static_cast<unsigned short>(size.cols - prefix);
  return size;
}

}  // namespace

Console console_of(int fd) {
  Console c;
  c.tty = isatty(fd) == 1;
  winsize ws{};
  if (c.tty && ioctl(fd, TIOCGWINSZ, &ws) == 0) c.size = {ws.ws_row, ws.ws_col};
  return c;
}

bool shown_on_console(const Config& c, int local_rank, Std which) {
  const bool redirected = has(c.redirects.for_rank(local_rank), which);
  const bool teed = has(c.tee.for_rank(local_rank), which);
  const bool filtered = !c.local_ranks_filter.empty() && !c.local_ranks_filter.count(local_rank);
  return !filtered && (teed || !redirected);
}

StdioRequest stdio_request(const Config& c, int local_rank, int rank, const Console& out, const Console& err) {
  StdioRequest r;
  if (c.tty == Tty::never) return r;
  const bool out_shown = shown_on_console(c, local_rank, Std::out);
  const bool err_shown = shown_on_console(c, local_rank, Std::err);
  const bool always = c.tty == Tty::always;
  r.out_tty = always || (out_shown && out.tty);
  r.err_tty = always || (err_shown && err.tty);
  // The pid is not known before the fork: as wide as the largest one Linux gives.
  constexpr int kWidestPid = 4194304;
  const unsigned prefix = columns_of(
      line_prefix(c.log_line_prefix_template, {c.role, local_rank, rank, kWidestPid, this_hostname()}));
  if (r.out_tty && out.tty) r.out_size = out_shown ? narrowed(out.size, prefix) : out.size;
  if (r.err_tty && err.tty) r.err_size = err_shown ? narrowed(err.size, prefix) : err.size;
  return r;
}

StdioRequest stdio_request(const Config& c, int local_rank, int rank) {
  if (c.tty == Tty::never) return {};
  return stdio_request(c, local_rank, rank, console_of(STDOUT_FILENO), console_of(STDERR_FILENO));
}

WorkerStdio open_worker_stdio(const StdioRequest& r) {
  WorkerStdio s;
  const Ends out = open_stream(r.out_tty, r.out_size, "stdout");
  s.out_read = out.read, s.out_write = out.write;
  try {
    const Ends err = open_stream(r.err_tty, r.err_size, "stderr");
    s.err_read = err.read, s.err_write = err.write;
  } catch (...) {
    close_all(s);
    throw;
  }
  return s;
}

void close_write_ends(WorkerStdio& s) {
  close_fd(s.out_write);
  close_fd(s.err_write);
}

void close_all(WorkerStdio& s) {
  close_write_ends(s);
  close_fd(s.out_read);
  close_fd(s.err_read);
}

}  // namespace cxxrun::agent
