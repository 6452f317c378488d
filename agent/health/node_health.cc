#include "agent/health/node_health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/forensics/failure.h"
#include "agent/health/gpu_health.h"
#include "agent/hostname.h"
#include "agent/process/private_files.h"

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;

CheckResult from_gpu(const GpuCheck& g, std::chrono::milliseconds took) { return {g.name, g.healthy, g.detail, took}; }

void log_result(const CheckResult& r) {
  if (r.stopped) return;  // no verdict
  if (r.healthy)
    spdlog::info("health check {}: {} ({} ms)", r.name, r.detail, r.took.count());
  else
    spdlog::error("{} ({} ms)", failure_line(r), r.took.count());
}

}  // namespace

NodeHealth::NodeHealth(const Config& config) : options_(config.health) {
  std::string why_not;
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  gpus_ = GpuHealth::open(visible ? std::optional<std::string>(visible) : std::nullopt, why_not);
  std::vector<std::string> what;
  if (!options_.command.empty()) what.push_back("command '" + options_.command + "'");
  for (const HealthPath& p : options_.paths)
    what.push_back("path " + p.path + (p.min_free ? " (" + byte_text(p.min_free) + " free)" : ""));
  if (gpus_) what.push_back(gpus_->describe());
  const bool rdma = check_rdma_ports().has_value();
  if (rdma) what.push_back("RDMA ports");
  empty_ = what.empty();
  if (!what.empty()) {
    std::string list = what.front();
    for (size_t i = 1; i < what.size(); ++i) list += ", " + what[i];
    spdlog::info("health checks before every round: {}{}", list, gpus_ ? "" : "; no GPU checks (" + why_not + ")");
  }
}

NodeHealth::~NodeHealth() { join(); }

void NodeHealth::join() {
  if (thread_.joinable()) thread_.join();
}

std::vector<CheckResult> NodeHealth::check(bool after_attempt) {
  std::vector<CheckResult> results;
  auto add = [&results](CheckResult r) {
    log_result(r);
    results.push_back(std::move(r));
    return results.back().healthy;
  };
  // Cheapest and most telling first; the first failure ends the round's
  // checks, since one is enough to step out.
  bool ok = true;
  if (gpus_) {
    if (after_attempt) {
      const auto start = Clock::now();
      const GpuCheck drained = gpus_->wait_memory_drained(kGpuMemoryDrainLimit, kGpuMemoryTolerance);
      ok = add(from_gpu(drained, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)));
    }
    const auto start = Clock::now();
    for (const GpuCheck& g : gpus_->check()) {
      if (!ok) break;
      ok = add(from_gpu(g, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)));
    }
  }
  if (ok && !stop_.stopped())
    if (auto rdma = check_rdma_ports()) ok = add(*rdma);
  for (const HealthPath& p : options_.paths)
    if (ok) ok = add(check_path(p, kPathCheckLimit, &stop_));
  if (ok && !options_.command.empty()) add(check_command(options_.command, options_.command_timeout, &stop_));
  // A stopped check is no verdict: /healthz keeps the last real ones.
  if (stop_.stopped()) return results;
  std::lock_guard<std::mutex> lock(mu_);
  last_ = results;
  return results;
}

void NodeHealth::check_async(bool after_attempt, Post post, std::function<void(std::vector<CheckResult>)> then) {
  join();  // the last one posted its verdict already
  thread_ = std::thread([this, after_attempt, post = std::move(post), then = std::move(then)] {
    auto results = check(after_attempt);
    post([then, results = std::move(results)] { then(results); });
  });
}

std::vector<CheckResult> NodeHealth::check_or_signal(const std::vector<int>& signals,
                                                     const std::set<int>& only_forwarded, int& received) {
  received = 0;
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  // Blocked, a signal waits for signalfd; the check's thread inherits the
  // mask, and its command's runner clears it.
  const int signals_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  int done[2] = {-1, -1};
  if (signals_fd < 0 || pipe2(done, O_CLOEXEC) != 0) {
    spdlog::warn("cannot watch for signals during the health checks ({}); a signal ends the agent meanwhile",
                 std::strerror(errno));
    if (signals_fd >= 0) ::close(signals_fd);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return check(false);
  }
  std::vector<CheckResult> results;
  std::thread checking([this, &results, done_w = done[1]] {
    results = check(false);
    ::close(done_w);
  });
  // Bounded by the checks' own bounds: the thread ends, and closes `done`.
  for (bool finished = false; !finished;) {
    pollfd p[2] = {{signals_fd, POLLIN, 0}, {done[0], POLLIN, 0}};
    if (poll(p, 2, 1000) < 0 && errno != EINTR) break;
    finished = p[1].revents != 0;
    signalfd_siginfo info{};
    // One that came as the checks ended counts too: unblocked, it would
    // end the agent by its default action.
    while (::read(signals_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (only_forwarded.count(sig) > 0) {
        spdlog::info("received {} during the health checks; no worker runs yet to forward it to", signal_name(sig));
      } else if (received == 0) {
        received = sig;
        spdlog::warn("received {} during the health checks; stopping them and exiting", signal_name(sig));
        stop();
      }
    }
  }
  checking.join();
  ::close(done[0]);
  ::close(signals_fd);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return results;
}

std::vector<CheckResult> NodeHealth::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

const CheckResult* first_failure(const std::vector<CheckResult>& results) {
  for (const CheckResult& r : results)
    if (!r.healthy && !r.stopped) return &r;
  return nullptr;
}

std::string failure_line(const CheckResult& failed) {
  return fmt::format("health check '{}' failed: {}", failed.name, failed.detail);
}

namespace {

// --exclude-file, opened for appending. Its last component is followed when
// it is a link of this user's (or root's) making, not one another user
// planted in a shared directory; and only a regular file is written (a
// FIFO would block, a device is no list). -1, with `why`, when not.
int open_exclude_file(const std::string& file, std::string& why) {
  constexpr int kFlags = O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK;  // read: its last byte
  const int fd = open_named_file(file, kFlags, why);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

void exclude_this_node(const std::string& file) {
  if (file.empty()) return;
  std::string why;
  const int fd = open_exclude_file(file, why);
  if (fd < 0) {
    spdlog::warn("cannot add {} to the exclude file {}: {}", this_hostname(), file, why);
    return;
  }
  // The nodes of a job may share the file: the look at its last byte and
  // the append go under a lock (a moment at most; without it, still one
  // O_APPEND write).
  for (int i = 0; i < 100 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK; ++i) usleep(10000);
  // A last line someone left unended would otherwise run into this one
  // ("node7" and "vm3" making "node7vm3").
  std::string line = this_hostname() + "\n";
  struct stat st {};
  char last = '\n';
  if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    line.insert(0, 1, '\n');
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    spdlog::warn("cannot add {} to the exclude file {}: {}", this_hostname(), file, std::strerror(errno));
  else
    spdlog::info("added {} to the exclude file {}", this_hostname(), file);
  ::close(fd);  // and the lock with it
}

std::string step_out_of_job(spdlog::logger& log, const Config& config, const CheckResult& failed, bool joined,
                            const std::function<void(const std::string& check, const std::string& line)>& record) {
  const std::string line = failure_line(failed);
  if (joined)
    log.error("this node is unhealthy ({}); it steps out of job {} so that a spare can take its place", line,
              config.run_id);
  else
    log.error("this node is unhealthy ({}); it does not join job {}, so that a spare can take its place", line,
              config.run_id);
  record(failed.name, line);
  exclude_this_node(config.health.exclude_file);
  return line;
}

}  // namespace cxxrun::agent
