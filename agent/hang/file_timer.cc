#include "agent/hang/file_timer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <random>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "agent/process/private_files.h"
#include "agent/process/stale_temp_dirs.h"

namespace cxxrun::agent {
namespace {

// torch refuses requests over PIPE_BUF (4096); anything far longer without a
// newline is garbage, not a request still arriving.
constexpr size_t kMaxLine = 64 * 1024;
// Bounds one call so that a flooding writer cannot starve the event loop;
// the fd stays readable and the next call goes on.
constexpr int kMaxReadsPerCall = 16;

std::string random_hex(int bytes) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < bytes; ++i) out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

// Where no other user can move the directory aside and put a FIFO of their
// own at the name the workers open (safe_temp_base: not a $TMPDIR others
// can write without the sticky bit); $TMPDIR or /tmp when there is none.
std::string make_private_dir() {
  std::string base = safe_temp_base();
  if (base.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    base = tmpdir && *tmpdir ? tmpdir : "/tmp";
  }
  std::string tmpl = owned_temp_template(base, kTimerDirPrefix);
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("file timer: cannot create " + tmpl + ": " + strerror(errno));
  return tmpl;
}

std::string excerpt(const std::string& line) { return line.size() <= 200 ? line : line.substr(0, 200) + "..."; }

}  // namespace

FileTimerServer::FileTimerServer(const std::string& path) {
  if (path.empty()) {
    own_dir_ = make_private_dir();
    path_ = own_dir_ + "/watchdog_timer_" + random_hex(16);
  } else {
    path_ = path;
  }
  auto fail = [this](const char* what) {
    const std::string msg = fmt::format("file timer: cannot {} {}: {}", what, path_, strerror(errno));
    if (read_fd_ >= 0) close(read_fd_);
    unlink(path_.c_str());
    if (!own_dir_.empty()) rmdir(own_dir_.c_str());
    throw std::runtime_error(msg);
  };
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) fail("replace");
  if (mkfifo(path_.c_str(), 0600) != 0) fail("create the FIFO");
  // Never through a link, and only the FIFO just made (a user's path may be
  // in a directory others can write).
  read_fd_ = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (read_fd_ < 0) fail("open");
  struct stat st {};
  if (fstat(read_fd_, &st) != 0 || !S_ISFIFO(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    errno = EPERM;
    fail("use (not the FIFO it made)");
  }
  // While a writer is open the read end never sees EOF, so it is readable
  // only when there is data, between clients as well.
  keep_open_fd_ = open(("/proc/self/fd/" + std::to_string(read_fd_)).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (keep_open_fd_ < 0) fail("open for writing");
  spdlog::info("file timer watchdog listening on {}", path_);
}

FileTimerServer::~FileTimerServer() {
  close(keep_open_fd_);
  close(read_fd_);
  unlink(path_.c_str());
  if (!own_dir_.empty()) rmdir(own_dir_.c_str());
}

std::unique_ptr<FileTimerServer> FileTimerServer::from_environment(const std::map<std::string, std::string>& env) {
  auto enabled = env.find("TORCHELASTIC_ENABLE_FILE_TIMER");
  if (enabled == env.end() || enabled->second != "1") return nullptr;
  auto path = env.find("TORCHELASTIC_TIMER_FILE");
  return std::make_unique<FileTimerServer>(path == env.end() ? "" : path->second);
}

void FileTimerServer::on_readable() {
  char buf[65536];
  for (int reads = 0; reads < kMaxReadsPerCall; ++reads) {
    const ssize_t n = read(read_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: drained (EOF cannot happen, a writer is held)
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      apply(partial_.substr(start, nl - start));
    partial_.erase(0, start);
    if (partial_.size() > kMaxLine) {
      spdlog::warn("file timer: dropping {} bytes without a newline", partial_.size());
      partial_.clear();
    }
  }
}

void FileTimerServer::apply(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  const auto doc = nlohmann::json::parse(line, nullptr, false);
  // pid <= 0 would make kill() hit a whole process group or every process.
  const bool valid = doc.is_object() && doc.contains("pid") && doc["pid"].is_number_integer() &&
                     doc["pid"].get<int64_t>() > 0 && doc["pid"].get<int64_t>() <= INT32_MAX &&
                     doc.contains("scope_id") && doc["scope_id"].is_string() && doc.contains("expiration_time") &&
                     doc["expiration_time"].is_number() && doc.contains("signal") && doc["signal"].is_number_integer();
  if (!valid) {
    spdlog::warn("file timer: ignoring malformed request: {}", excerpt(line));
    return;
  }
  TimerExpiry t{doc["pid"].get<pid_t>(), doc["scope_id"].get<std::string>(), doc["signal"].get<int>(),
                doc["expiration_time"].get<double>()};
  auto key = std::make_pair(t.pid, t.scope_id);
  if (t.expiration_time < 0) {
    if (timers_.erase(key)) spdlog::debug("file timer: pid {} released '{}'", t.pid, t.scope_id);
    return;
  }
  spdlog::debug("file timer: pid {} set '{}' to expire at {:.3f}", t.pid, t.scope_id, t.expiration_time);
  timers_[key] = std::move(t);
}

std::vector<TimerExpiry> FileTimerServer::expired(double now) {
  std::map<pid_t, TimerExpiry> chosen;
  for (const auto& [key, t] : timers_) {
    if (t.expiration_time > now) continue;
    auto [it, fresh] = chosen.emplace(t.pid, t);
    TimerExpiry& c = it->second;
    // torch sorts a pid's expired timers and kills with the first signal > 0.
    const bool better = (t.signal > 0) != (c.signal > 0) ? t.signal > 0 : t.expiration_time < c.expiration_time;
    if (!fresh && better) c = t;
  }
  std::vector<TimerExpiry> out;
  for (auto& [pid, t] : chosen) {
    forget(pid);
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(),
            [](const TimerExpiry& a, const TimerExpiry& b) { return a.expiration_time < b.expiration_time; });
  return out;
}

std::vector<TimerExpiry> FileTimerServer::expired() {
  using namespace std::chrono;
  return expired(duration<double>(system_clock::now().time_since_epoch()).count());
}

void FileTimerServer::forget(pid_t pid) {
  auto it = timers_.lower_bound({pid, std::string()});
  while (it != timers_.end() && it->first.first == pid) it = timers_.erase(it);
}

}  // namespace cxxrun::agent
