// Where the bytes of one worker stream go: the console with a per-rank line
// prefix (unless filtered out or redirected without tee), a log file, and
// what the failure summary shows of it: a short in-memory tail and the last
// Python traceback or faulthandler report, whole (agent/forensics/python_traceback.h).
//
// The console is live: a line is shown as it ends, a '\r' redraw (a progress
// bar) at once with the prefix again, and a fragment the worker leaves
// hanging once the caller says the stream went idle (flush_pending()).
// The sinks that show on one console (one terminal, pipe or file: stdout
// and stderr that name the same one share it) keep its lines apart: a sink
// that writes while the console's current line holds another sink's
// unended text (a fragment, a redraw) ends that line first, and the other
// sink's rest comes on a line of its own with its prefix again. So every
// console line carries one prefix and one rank's text. The sinks of one
// console are written from one thread (the agent's loop).
#pragma once

#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/forensics/python_traceback.h"

namespace cxxrun::agent {

class FilteredLog;
struct ConsoleLine;

// What a console prefix may name.
struct PrefixFields {
  std::string role;
  int local_rank = 0;
  int rank = 0;
  int pid = 0;
  std::string hostname;
};

// Expands TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE's ${role_name}, ${local_rank}
// and ${rank} (torch's), and ${pid} and ${hostname} (which torch leaves
// literal); an empty template gives torchrun's "[<role><local_rank>]:".
std::string line_prefix(const std::string& tmpl, const PrefixFields& fields);

class StreamSink {
 public:
  // console_fd < 0: not shown on the console. file_path empty: no file.
  StreamSink(std::string prefix, int console_fd, const std::string& file_path, size_t tail_lines);
  ~StreamSink();
  StreamSink(const StreamSink&) = delete;
  StreamSink& operator=(const StreamSink&) = delete;

  // Whole lines of this stream also go to `log` (shared by the attempt's
  // ranks; it outlives this sink), where they match its filters.
  void duplicate_to(FilteredLog* log) { duplicate_ = log; }
  // Every line of this stream also goes to `observer`, without the prefix:
  // the lines the worker wrote, where '\n' and a redraw's '\r' each end one
  // (a progress bar's steps are lines too). Set only when someone looks
  // (--progress-pattern), so a sink without one splits nothing more.
  using LineObserver = std::function<void(std::string_view line)>;
  void observe_lines(LineObserver observer) { observer_ = std::move(observer); }

  void write(std::string_view bytes);
  // Whether the console holds back a fragment not shown yet.
  bool has_pending() const { return !pending_.empty(); }
  // Shows that fragment now (the worker has been quiet for a while).
  void flush_pending();
  // Emits a trailing partial line and closes the file.
  void finish();
  const std::deque<std::string>& tail() const { return tail_; }
  // The stream's last traceback, kept with the tail (a stream with no tail
  // keeps none).
  const TracebackCapture& last_traceback() const { return traceback_; }
  // Every byte the stream brought so far: output is progress (agent/hang/progress_monitor.h).
  unsigned long long bytes() const { return bytes_; }
  // Bytes the file did not take (a full disk, an I/O error), said in the
  // log once as it starts and once in all at finish().
  size_t lost_bytes() const { return lost_bytes_; }

 private:
  void to_console(std::string_view bytes);
  // Writes `out` to the console, after ending a line another sink left
  // unended; `leaves_open`: `out` itself ends unended (a fragment, a redraw).
  void emit(std::string out, bool leaves_open);
  void to_file(std::string_view bytes);
  void keep_line(std::string_view line);
  void to_duplicate(std::string_view bytes);
  void to_observer(std::string_view bytes);

  std::string prefix_;
  int console_fd_;
  std::string path_;
  std::FILE* file_ = nullptr;
  size_t lost_bytes_ = 0;
  unsigned long long bytes_ = 0;
  size_t tail_max_;
  std::string partial_;  // the tail's line so far
  std::deque<std::string> tail_;
  TracebackCapture traceback_;
  FilteredLog* duplicate_ = nullptr;
  std::string duplicate_partial_;  // the filtered copy's line so far
  LineObserver observer_;
  std::string observed_partial_;  // the observer's line so far
  std::string pending_;  // the console's fragment not shown yet
  bool open_ = false;    // the console's current line was begun (prefix shown)
  std::shared_ptr<ConsoleLine> line_;  // whose text the console's current line holds
};

}  // namespace cxxrun::agent
