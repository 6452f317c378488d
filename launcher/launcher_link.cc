#include "launcher/launcher_link.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "launcher/errors.h"

namespace cxxrun::launcher {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void write_all_to(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher is gone: nothing to tell
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void on_line(std::string_view line) {
  if (int sig = control_signal(line)) {
    spdlog::info("the launcher forwards {}", line);
    ::kill(::getpid(), sig);
  } else {
    spdlog::warn("ignoring a line from the launcher that names no signal ({} bytes)", line.size());
  }
}

void watch(LauncherLink link) {
  std::string pending = std::move(link.after);
  char buf[256];
  // Bounded by the pipe: it ends at EOF, and the process ends the thread.
  for (;;) {
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      on_line(std::string_view(pending).substr(0, nl));
      pending.erase(0, nl + 1);
    }
    pollfd p{link.fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 1000);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(link.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    if (pending.size() > 4096) pending.clear();  // no line is this long
  }
  spdlog::warn("the launcher's connection closed (stdin ended): stopping this node's workers and exiting");
  ::kill(::getpid(), SIGTERM);
}

}  // namespace

int control_signal(std::string_view line) {
  for (int sig : kSignals)
    if (line == control_line(sig)) return sig;
  return 0;
}

std::string control_line(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : std::to_string(sig);
}

LauncherLink take_launcher_stdin(std::chrono::milliseconds deadline) {
  LauncherLink link;
  std::string got;
  const auto until = std::chrono::steady_clock::now() + deadline;
  char buf[256];
  for (;;) {
    if (auto nl = got.find('\n'); nl != std::string::npos) {
      link.token = got.substr(0, nl);
      link.after = got.substr(nl + 1);
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw UsageError(fmt::format("--from-launcher: no token line on stdin within {} s (this flag is for the agents "
                                   "cxxrun --hostfile starts)",
                                   std::chrono::duration_cast<std::chrono::seconds>(deadline).count()));
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) throw UsageError(std::string("--from-launcher: stdin: ") + std::strerror(errno));
    if (ready <= 0) continue;
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0)
      throw UsageError("--from-launcher: stdin ended before the token line (this flag is for the agents cxxrun "
                       "--hostfile starts)");
    got.append(buf, static_cast<size_t>(n));
    if (got.size() > 4096) throw UsageError("--from-launcher: the token line on stdin is longer than 4096 bytes");
  }
  if (link.token.ends_with('\r')) link.token.pop_back();
  link.fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (link.fd < 0 || null < 0) throw std::runtime_error(std::string("--from-launcher: ") + std::strerror(errno));
  ::dup2(null, STDIN_FILENO);  // dup2 clears close-on-exec on 0
  ::close(null);
  write_all_to(STDOUT_FILENO, fmt::format("{}{}\n", kReady, ::getpid()));
  return link;
}

void watch_launcher(LauncherLink link) {
  // Every signal blocked here: the agent's own threads and loop take them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread(watch, std::move(link)).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void say_exited(int code) { write_all_to(STDOUT_FILENO, fmt::format("{}{}\n", kExited, code)); }

}  // namespace cxxrun::launcher
