// What a Python worker printed about its own end, read from its stderr: the
// last uncaught-exception traceback ("Traceback (most recent call last):")
// or faulthandler's report of a fatal signal ("Fatal Python error: ..."),
// kept whole (bounded in bytes) as the lines arrive, and parsed for what
// the failure summary names: the exception's message, the innermost frame
// of the user's own code, and for a crash the thread that crashed.
//
// Pure but for the clock a capture is given; no logging.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

struct PythonFrame {
  std::string file;
  int line = 0;
  std::string function;
  std::string source;  // the source line Python printed under it ("" for faulthandler's frames)
};

struct PythonTraceback {
  // "ValueError: boom", the first line of the exception; for a fatal
  // signal, faulthandler's "Fatal Python error: Segmentation fault".
  std::string exception;
  // The frames of the exception, or of the thread that crashed; outermost
  // first.
  std::vector<PythonFrame> frames;
  bool fatal = false;  // faulthandler's report of a fatal signal
  // A fatal report: faulthandler's header of the thread that crashed
  // ("Current thread 0x... (most recent call first):") and how many other
  // threads it listed.
  std::string thread;
  int other_threads = 0;
};

// The last traceback or faulthandler report in `text` (lines as Python
// printed them); nullopt when there is none. A chained exception reads as
// its last traceback, the one that ended the program.
std::optional<PythonTraceback> parse_traceback(std::string_view text);

// The innermost frame of the user's own code; the innermost frame when
// every frame is a library's; nullptr when there are none.
const PythonFrame* innermost_user_frame(const PythonTraceback& tb);

// "ValueError: boom; in its own code at /x/train.py:12 in train: out =
// model(x)": what the summary's cause line says of it.
std::string describe_traceback(const PythonTraceback& tb);

// For a fatal report: faulthandler's header, the thread that crashed and
// its frames only ("N other threads not shown"); any other text unchanged.
std::string crashing_thread_text(std::string_view text);

// Collects one stream's last traceback or faulthandler report as its lines
// arrive, whole up to kMaxBytes (older frames go first, the header and the
// exception stay), with the time its first line came.
class TracebackCapture {
 public:
  static constexpr size_t kMaxBytes = 32 * 1024;

  void line(std::string_view line, std::chrono::system_clock::time_point now);
  // The capture's text ("" when none), lines joined with '\n'.
  std::string text() const;
  // When its first line arrived (nullopt: none).
  std::optional<std::chrono::system_clock::time_point> since() const { return since_; }

 private:
  enum class State { none, frames, message, done, fatal };
  State state_ = State::none;
  std::vector<std::string> lines_;
  size_t bytes_ = 0;
  size_t cut_ = 0;  // frame lines dropped to stay within kMaxBytes
  int message_lines_ = 0;
  bool other_thread_ = false;  // a fatal report: within another thread's frames
  std::optional<std::chrono::system_clock::time_point> since_;
};

}  // namespace cxxrun::agent
