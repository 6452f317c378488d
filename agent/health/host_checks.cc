#include "agent/health/host_checks.h"

#include "agent/health/check_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What a failed command shows of its output: enough for a reason.
constexpr size_t kMaxOutput = 64 * 1024;

milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

std::string first_line(const std::string& text) {
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  const auto end = text.find_first_of("\r\n", start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "ended";
}

void close_check_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

std::string byte_text(unsigned long long bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

CheckStop::CheckStop() {
  if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
}

CheckStop::~CheckStop() { close_check_fd(pipe_[0]), close_check_fd(pipe_[1]); }

void CheckStop::stop() {
  if (stopped_.exchange(true)) return;
  (void)!::write(pipe_[1], "x", 1);
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out.push_back(c);
  }
  return out;
}

CheckResult check_command(const std::string& command, milliseconds timeout, const CheckStop* stop) {
  const auto start = Clock::now();
  CheckResult r{"command", false, "", {}};
  if (stop && stop->stopped()) {
    r.stopped = true;
    r.detail = "not run: the agent is exiting";
    return r;
  }
  std::optional<ContainedCommand> run;
  try {
    run.emplace(command.c_str());
  } catch (const std::system_error& e) {
    r.detail = fmt::format("cannot run it: {}", e.what());
    return r;
  }
  std::string text[2];
  std::optional<int> status;
  bool timed_out = false;
  std::optional<Clock::time_point> ended;
  int* outputs[2] = {&run->out_fd(), &run->err_fd()};
  for (;;) {
    if (status && *outputs[0] < 0 && *outputs[1] < 0) break;
    // Once the command is done, output still open belongs to something it
    // left running: a moment more for its last words, then no more.
    if (status && !ended) ended = Clock::now();
    if (ended && since(*ended) > milliseconds(200)) break;
    if (!status && run->gone()) break;  // the runner ended without a status: it could not run the command
    const auto left = timeout - since(start);
    if (left.count() <= 0) {
      timed_out = !status;
      break;
    }
    pollfd p[4] = {{*outputs[0], POLLIN, 0}, {*outputs[1], POLLIN, 0},
                   {status ? -1 : run->status_fd(), POLLIN, 0}, {stop ? stop->fd() : -1, POLLIN, 0}};
    const int n = poll(p, 4, static_cast<int>(std::min<long long>(left.count(), ended ? 50 : 1000)));
    if (n < 0 && errno != EINTR) break;
    if (p[3].revents != 0) {
      r.stopped = true;
      break;
    }
    if (p[2].revents != 0) status = run->read_status();
    for (int i = 0; i < 2; ++i) {
      if (*outputs[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t got = ::read(*outputs[i], buf, sizeof buf);
      if (got <= 0) close_check_fd(*outputs[i]);
      else if (text[i].size() < kMaxOutput) text[i].append(buf, static_cast<size_t>(got));
    }
  }
  run->end();  // the command's strays (and, on a timeout or a stop, itself)
  r.took = since(start);
  std::string said = printable(first_line(text[0]));
  if (said.empty()) said = printable(first_line(text[1]));
  if (r.stopped) {
    r.detail = fmt::format("'{}' was stopped after {} s: the agent is exiting", command, r.took.count() / 1000.0);
  } else if (timed_out) {
    r.detail = fmt::format("'{}' did not finish within {} s{}", command, timeout.count() / 1000.0,
                           said.empty() ? "" : "; it said: " + said);
  } else if (!status) {
    r.detail = fmt::format("'{}' could not be run", command);
  } else if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
    r.healthy = true;
    r.detail = said.empty() ? "ok" : said;
  } else {
    r.detail = fmt::format("{} ({} of '{}')", said.empty() ? "no reason given" : said, status_text(*status), command);
  }
  return r;
}

CheckResult check_path(const HealthPath& p, milliseconds timeout, const CheckStop* stop) {
  const auto start = Clock::now();
  if (stop && stop->stopped()) return {"path " + p.path, false, "not checked: the agent is exiting", {}, true};
  auto result = std::make_shared<std::promise<CheckResult>>();
  auto verdict = result->get_future();
  std::thread([p, result] {
    CheckResult r{"path " + p.path, false, "", {}};
    std::error_code ec;
    if (!fs::exists(p.path, ec)) {
      r.detail = fmt::format("{} does not exist (not mounted?){}", p.path, ec ? ": " + ec.message() : "");
      return result->set_value(r);
    }
    if (!fs::is_directory(p.path, ec)) {
      r.detail = fmt::format("{} is not a directory", p.path);
      return result->set_value(r);
    }
    std::string probe = p.path + "/.cxxrun-health-XXXXXX";
    const int fd = mkstemp(probe.data());
    if (fd < 0) {
      r.detail = fmt::format("cannot create a file in {}: {}", p.path, std::strerror(errno));
      return result->set_value(r);
    }
    const bool wrote = ::write(fd, "cxxrun\n", 7) == 7 && fsync(fd) == 0;
    const int write_errno = errno;
    ::close(fd);
    ::unlink(probe.c_str());
    if (!wrote) {
      r.detail = fmt::format("cannot write to {}: {}", p.path, std::strerror(write_errno));
      return result->set_value(r);
    }
    struct statvfs fs_info {};
    if (statvfs(p.path.c_str(), &fs_info) != 0) {
      r.detail = fmt::format("cannot read the free space of {}: {}", p.path, std::strerror(errno));
      return result->set_value(r);
    }
    const unsigned long long free = static_cast<unsigned long long>(fs_info.f_bavail) * fs_info.f_frsize;
    r.healthy = free >= p.min_free;
    r.detail = r.healthy ? fmt::format("writable, {} free", byte_text(free))
                         : fmt::format("{} has {} free, less than the {} required", p.path, byte_text(free),
                                       byte_text(p.min_free));
    result->set_value(r);
  }).detach();
  CheckResult r{"path " + p.path, false, "", {}};
  // In slices, so that a stop ends the wait.
  bool ready = false;
  while (!ready && since(start) < timeout && !(stop && stop->stopped()))
    ready = verdict.wait_for(std::min(milliseconds(50), timeout - since(start))) == std::future_status::ready;
  if (ready) r = verdict.get();
  else if (stop && stop->stopped()) r.stopped = true, r.detail = "stopped: the agent is exiting";
  else r.detail = fmt::format("{} did not answer within {} s (a hung mount?)", p.path, timeout.count() / 1000.0);
  r.took = since(start);
  return r;
}

std::optional<CheckResult> check_rdma_ports(const std::string& sysfs) {
  const auto start = Clock::now();
  const fs::path root = fs::path(sysfs) / "class" / "infiniband";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  std::vector<std::string> bad, good;
  for (const auto& device : fs::directory_iterator(root, ec)) {
    for (const auto& port : fs::directory_iterator(device.path() / "ports", ec)) {
      const std::string name = device.path().filename().string() + "/" + port.path().filename().string();
      const std::string state = read_text(port.path() / "state");          // "4: ACTIVE"
      const std::string phys = read_text(port.path() / "phys_state");      // "5: LinkUp"
      if (phys.find("Disabled") != std::string::npos) continue;
      if (state.find("ACTIVE") != std::string::npos) {
        good.push_back(name);
      } else {
        const auto colon = state.find(": ");
        bad.push_back(fmt::format("{} is {} ({})", name, colon == std::string::npos ? state : state.substr(colon + 2),
                                  phys.empty() ? "no physical state" : phys.substr(phys.find(": ") == std::string::npos ? 0 : phys.find(": ") + 2)));
      }
    }
  }
  if (bad.empty() && good.empty()) return std::nullopt;
  CheckResult r{"rdma", bad.empty(), "", since(start)};
  if (bad.empty()) {
    r.detail = fmt::format("{} port{} active", good.size(), good.size() == 1 ? "" : "s");
  } else {
    r.detail = "RDMA port " + bad.front();
    for (size_t i = 1; i < bad.size(); ++i) r.detail += ", " + bad[i];
  }
  return r;
}

}  // namespace cxxrun::agent
