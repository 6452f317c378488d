// Where the bytes of one worker stream go: the console with a per-rank line
// prefix (unless filtered out or redirected without tee), a log file, and a
// short in-memory tail that the failure summary shows.
#pragma once

#include <cstdio>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

// Expands TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE's ${role_name}, ${local_rank}
// and ${rank}; an empty template gives torchrun's "[<role><local_rank>]:".
std::string line_prefix(const std::string& tmpl, const std::string& role, int local_rank, int rank);

class StreamSink {
 public:
  // console_fd < 0: not shown on the console. file_path empty: no file.
  StreamSink(std::string prefix, int console_fd, const std::string& file_path, size_t tail_lines);
  ~StreamSink();
  StreamSink(const StreamSink&) = delete;
  StreamSink& operator=(const StreamSink&) = delete;

  void write(std::string_view bytes);
  // Emits a trailing partial line and closes the file.
  void finish();
  const std::deque<std::string>& tail() const { return tail_; }

 private:
  void emit_line(std::string_view line);

  std::string prefix_;
  int console_fd_;
  std::FILE* file_ = nullptr;
  size_t tail_max_;
  std::string partial_;
  std::deque<std::string> tail_;
};

}  // namespace cxxrun::agent
