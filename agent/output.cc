#include "agent/output.h"

#include <errno.h>
#include <unistd.h>

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

std::string line_prefix(const std::string& tmpl, const std::string& role, int local_rank, int rank) {
  std::string p = tmpl.empty() ? "[${role_name}${local_rank}]:" : tmpl;
  replace_all(p, "${role_name}", role);
  replace_all(p, "${local_rank}", std::to_string(local_rank));
  replace_all(p, "${rank}", std::to_string(rank));
  return p;
}

StreamSink::StreamSink(std::string prefix, int console_fd, const std::string& file_path, size_t tail_lines)
    : prefix_(std::move(prefix)), console_fd_(console_fd), tail_max_(tail_lines) {
  if (!file_path.empty()) file_ = std::fopen(file_path.c_str(), "we");
}

StreamSink::~StreamSink() {
  if (file_) std::fclose(file_);
}

void StreamSink::write(std::string_view bytes) {
  if (file_) {
    std::fwrite(bytes.data(), 1, bytes.size(), file_);
    std::fflush(file_);
  }
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() >= kMaxLine) {
        emit_line(partial_);
        partial_.clear();
      }
      return;
    }
    if (partial_.empty()) {
      emit_line(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      emit_line(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void StreamSink::emit_line(std::string_view line) {
  if (console_fd_ >= 0) {
    // One write per line keeps lines of different ranks from interleaving.
    std::string out;
    out.reserve(prefix_.size() + line.size() + 1);
    out.append(prefix_).append(line).push_back('\n');
    write_all(console_fd_, out.data(), out.size());
  }
  if (tail_max_ == 0) return;
  if (tail_.size() == tail_max_) tail_.pop_front();
  tail_.emplace_back(line);
}

void StreamSink::finish() {
  if (!partial_.empty()) {
    emit_line(partial_);
    partial_.clear();
  }
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace cxxrun::agent
