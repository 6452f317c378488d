#include "agent/workers/output.h"

#include "agent/workers/filtered_log.h"
#include "agent/process/private_files.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

namespace cxxrun::agent {
namespace {

// Lines longer than this are cut into pieces so one runaway line cannot grow
// the agent's memory.
constexpr size_t kMaxLine = 64 * 1024;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // console gone: keep draining the worker, drop the text
    }
    data += n, size -= n;
  }
}

}  // namespace

// One console's current line: whose unended text it holds, if any.
struct ConsoleLine {
  StreamSink* holder = nullptr;
  bool held_by_gone = false;  // a sink destroyed while the line held its text
};

namespace {

// The consoles sinks write to, by the file behind the descriptor, so that
// fds 1 and 2 on one terminal share theirs. Entries go with their last sink.
std::shared_ptr<ConsoleLine> console_line(int fd) {
  static std::mutex mu;
  static std::map<std::pair<dev_t, ino_t>, std::weak_ptr<ConsoleLine>> consoles;
  struct stat st {};
  const auto key = fstat(fd, &st) == 0 ? std::make_pair(st.st_dev, st.st_ino)
                                       : std::make_pair(dev_t(0), static_cast<ino_t>(fd));
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(consoles, [](const auto& entry) { return entry.second.expired(); });
  std::shared_ptr<ConsoleLine> line = consoles[key].lock();
  if (!line) consoles[key] = line = std::make_shared<ConsoleLine>();
  return line;
}

}  // namespace

std::string line_prefix(const std::string& tmpl, const PrefixFields& f) {
  std::string p = tmpl.empty() ? "[${role_name}${local_rank}]:" : tmpl;
  replace_all(p, "${role_name}", f.role);
  replace_all(p, "${local_rank}", std::to_string(f.local_rank));
  replace_all(p, "${rank}", std::to_string(f.rank));
  replace_all(p, "${pid}", std::to_string(f.pid));
  replace_all(p, "${hostname}", f.hostname);
  return p;
}

StreamSink::StreamSink(std::string prefix, int console_fd, const std::string& file_path, size_t tail_lines)
    : prefix_(std::move(prefix)), console_fd_(console_fd), path_(file_path), tail_max_(tail_lines) {
  if (console_fd_ >= 0) line_ = console_line(console_fd_);
  if (file_path.empty()) return;
  file_ = open_private_stream(file_path);  // 0600, never through a link (agent/process/private_files.h)
  if (!file_)
    spdlog::warn("{} cannot open {}: {}; this worker's output is not kept in a file", prefix_, path_,
                 std::strerror(errno));
}

StreamSink::~StreamSink() {
  if (line_ && line_->holder == this) line_->holder = nullptr, line_->held_by_gone = true;
  if (file_) std::fclose(file_);
}

void StreamSink::emit(std::string out, bool leaves_open) {
  if (out.empty()) return;
  if ((line_->holder != nullptr && line_->holder != this) || line_->held_by_gone) {
    out.insert(0, 1, '\n');
    if (line_->holder != nullptr) line_->holder->open_ = false;  // its rest starts a line, prefixed
    line_->held_by_gone = false;
  }
  write_all(console_fd_, out.data(), out.size());
  line_->holder = leaves_open ? this : nullptr;
}

// A full disk must not lose output unseen: the first loss is one line, and
// finish() says how much went missing in all. Writing goes on trying, so a
// disk that gets room again gets the rest.
void StreamSink::to_file(std::string_view bytes) {
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size() && std::fflush(file_) == 0;
  if (ok) return;
  const int error = errno;
  std::clearerr(file_);
  if (lost_bytes_ == 0)
    spdlog::warn("{} cannot write to {}: {}; this worker's output is being lost from the file (the console "
                 "and the failure summary still get it)",
                 prefix_, path_, std::strerror(error));
  lost_bytes_ += bytes.size();
}

void StreamSink::write(std::string_view bytes) {
  bytes_ += bytes.size();
  if (file_) to_file(bytes);
  if (console_fd_ >= 0) to_console(bytes);
  if (duplicate_) to_duplicate(bytes);
  if (observer_) to_observer(bytes);
  if (tail_max_ == 0) return;
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() >= kMaxLine) {
        keep_line(partial_);
        partial_.clear();
      }
      return;
    }
    partial_.append(bytes.substr(0, nl));
    keep_line(partial_);
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

// Everything up to the last '\n' or '\r' goes out in one write; each piece
// after a line end or a redraw begins with the prefix.
void StreamSink::to_console(std::string_view bytes) {
  std::string out;
  char last = '\n';
  while (!bytes.empty()) {
    const auto end = bytes.find_first_of("\n\r");
    if (end == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLine) {
        out.append(open_ ? "" : prefix_).append(pending_).push_back('\n');
        pending_.clear();
        open_ = false;
        last = '\n';
      }
      break;
    }
    out.append(open_ ? "" : prefix_).append(pending_).append(bytes.substr(0, end + 1));
    pending_.clear();
    open_ = false;
    last = bytes[end];
    bytes.remove_prefix(end + 1);
  }
  emit(std::move(out), last == '\r');  // a redraw holds the line until the next one, or a line end
}

void StreamSink::flush_pending() {
  if (pending_.empty() || console_fd_ < 0) return;
  std::string out = (open_ ? "" : prefix_) + pending_;
  emit(std::move(out), true);
  pending_.clear();
  open_ = true;
}

void StreamSink::to_duplicate(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      duplicate_partial_.append(bytes);
      if (duplicate_partial_.size() < kMaxLine) return;
      duplicate_->line(prefix_, duplicate_partial_);
      duplicate_partial_.clear();
      return;
    }
    duplicate_partial_.append(bytes.substr(0, nl));
    duplicate_->line(prefix_, duplicate_partial_);
    duplicate_partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

void StreamSink::to_observer(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto end = bytes.find_first_of("\n\r");
    if (end == std::string_view::npos) {
      observed_partial_.append(bytes);
      if (observed_partial_.size() < kMaxLine) return;
      observer_(observed_partial_);
      observed_partial_.clear();
      return;
    }
    if (observed_partial_.empty()) {
      observer_(bytes.substr(0, end));  // a whole line in this read: no copy
    } else {
      observed_partial_.append(bytes.substr(0, end));
      observer_(observed_partial_);
      observed_partial_.clear();
    }
    bytes.remove_prefix(end + 1);
  }
}

void StreamSink::keep_line(std::string_view line) {
  traceback_.line(line, std::chrono::system_clock::now());
  if (tail_.size() == tail_max_) tail_.pop_front();
  tail_.emplace_back(line);
}

void StreamSink::finish() {
  if (console_fd_ >= 0 && (open_ || !pending_.empty())) {
    emit((open_ ? "" : prefix_) + pending_ + "\n", false);
    pending_.clear();
    open_ = false;
  }
  if (duplicate_ && !duplicate_partial_.empty()) {
    duplicate_->line(prefix_, duplicate_partial_);
    duplicate_partial_.clear();
  }
  if (observer_ && !observed_partial_.empty()) {
    observer_(observed_partial_);
    observed_partial_.clear();
  }
  if (tail_max_ > 0 && !partial_.empty()) {
    keep_line(partial_);
    partial_.clear();
  }
  if (file_) {
    if (std::fclose(file_) != 0 && lost_bytes_ == 0) lost_bytes_ = 1;  // the last buffered bytes
    file_ = nullptr;
  }
  if (lost_bytes_ > 0)
    spdlog::warn("{} {}: about {} bytes of this worker's output could not be written", prefix_, path_, lost_bytes_);
}

}  // namespace cxxrun::agent
