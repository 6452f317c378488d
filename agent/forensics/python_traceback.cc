#include "agent/forensics/python_traceback.h"

#include <cctype>

#include "agent/forensics/library_file.h"

namespace cxxrun::agent {
namespace {

constexpr std::string_view kTracebackHeader = "Traceback (most recent call last):";
constexpr std::string_view kFatalHeader = "Fatal Python error: ";
constexpr std::string_view kCurrentThread = "Current thread 0x";
constexpr std::string_view kOtherThread = "Thread 0x";
// A cause line stays one readable line.
constexpr size_t kMaxMessage = 300;

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Python 3.11's position markers under a source line: "    ^^^^~~~~".
bool marker_line(std::string_view line) {
  line = trim_blanks(line);
  return !line.empty() && line.find_first_not_of("^~") == std::string_view::npos;
}

// '  File "x.py", line 12, in train' (a traceback) or '  File "x.py", line
// 12 in train' (faulthandler).
std::optional<PythonFrame> frame_line(std::string_view line) {
  constexpr std::string_view kFile = "  File \"";
  if (!line.starts_with(kFile)) return std::nullopt;
  line.remove_prefix(kFile.size());
  const size_t quote = line.find("\", line ");
  if (quote == std::string_view::npos) return std::nullopt;
  PythonFrame f;
  f.file = std::string(line.substr(0, quote));
  line.remove_prefix(quote + 8);
  size_t digits = 0;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  if (digits == 0 || digits > 9) return std::nullopt;
  f.line = std::stoi(std::string(line.substr(0, digits)));
  line.remove_prefix(digits);
  if (line.starts_with(",")) line.remove_prefix(1);
  line = trim_blanks(line);
  if (line.starts_with("in ")) f.function = std::string(trim_blanks(line.substr(3)));
  return f;
}

std::string shortened(std::string_view s) {
  if (s.size() <= kMaxMessage) return std::string(s);
  return std::string(s.substr(0, kMaxMessage)) + "...";
}

}  // namespace

std::optional<PythonTraceback> parse_traceback(std::string_view text) {
  const std::vector<std::string_view> lines = split_lines(text);
  size_t start = lines.size();
  for (size_t i = lines.size(); i-- > 0;)
    if (lines[i].starts_with(kTracebackHeader) || lines[i].starts_with(kFatalHeader)) {
      start = i;
      break;
    }
  if (start == lines.size()) return std::nullopt;
  PythonTraceback tb;
  if (lines[start].starts_with(kFatalHeader)) {
    tb.fatal = true;
    tb.exception = std::string(trim_blanks(lines[start]));
    bool current = false;
    for (size_t i = start + 1; i < lines.size(); ++i) {
      const std::string_view l = lines[i];
      if (l.starts_with(kCurrentThread)) {
        current = true;
        tb.thread = std::string(l);
      } else if (l.starts_with(kOtherThread)) {
        current = false;
        ++tb.other_threads;
      } else if (auto f = frame_line(l); f && current) {
        tb.frames.insert(tb.frames.begin(), *f);  // faulthandler lists the most recent call first
      } else if (!l.starts_with("  ")) {
        current = false;
      }
    }
    return tb;
  }
  size_t i = start + 1;
  for (; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (auto f = frame_line(l)) {
      tb.frames.push_back(*f);
    } else if (l.starts_with(" ") || l.empty()) {
      // The frame's source line (the first indented line under it), Python
      // 3.11's markers, "[Previous line repeated N more times]".
      if (!tb.frames.empty() && tb.frames.back().source.empty() && !marker_line(l) &&
          !trim_blanks(l).starts_with("[Previous line"))
        tb.frames.back().source = std::string(trim_blanks(l));
    } else {
      tb.exception = shortened(trim_blanks(l));
      break;
    }
  }
  return tb;
}

const PythonFrame* innermost_user_frame(const PythonTraceback& tb) {
  for (auto it = tb.frames.rbegin(); it != tb.frames.rend(); ++it)
    if (!python_library_file(it->file)) return &*it;
  return tb.frames.empty() ? nullptr : &tb.frames.back();
}

std::string describe_traceback(const PythonTraceback& tb) {
  std::string out = tb.exception;
  if (const PythonFrame* f = innermost_user_frame(tb)) {
    out += python_library_file(f->file) ? "; innermost frame at " : "; in its own code at ";
    out += f->file + ":" + std::to_string(f->line);
    if (!f->function.empty()) out += " in " + f->function;
    if (!f->source.empty()) out += ": " + shortened(f->source);
  } else if (tb.fatal && !tb.thread.empty()) {
    out += "; the thread that crashed ran no Python code";
  }
  return out;
}

std::string crashing_thread_text(std::string_view text) {
  const std::vector<std::string_view> lines = split_lines(text);
  if (lines.empty() || !lines[0].starts_with(kFatalHeader)) return std::string(text);
  std::string out(lines[0]);
  bool current = false;
  int others = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (l.starts_with(kCurrentThread)) {
      current = true;
      out += "\n\n" + std::string(l);
    } else if (l.starts_with(kOtherThread)) {
      current = false;
      ++others;
    } else if (current && l.starts_with("  ")) {
      out += "\n" + std::string(l);
    } else {
      current = false;
    }
  }
  if (others > 0) out += "\n(" + std::to_string(others) + " other thread" + (others == 1 ? "" : "s") + " not shown)";
  return out;
}

void TracebackCapture::line(std::string_view l, std::chrono::system_clock::time_point now) {
  if (l.starts_with(kTracebackHeader) || l.starts_with(kFatalHeader)) {
    state_ = l.starts_with(kFatalHeader) ? State::fatal : State::frames;
    lines_.assign(1, std::string(l.substr(0, kMaxBytes)));
    bytes_ = lines_[0].size();
    cut_ = 0;
    message_lines_ = 0;
    other_thread_ = false;
    since_ = now;
    return;
  }
  switch (state_) {
    case State::none:
    case State::done: return;
    case State::frames:
      if (!l.starts_with(" ") && !l.empty()) state_ = State::message;
      break;
    case State::message:
      // A message goes on in indented lines (torch's "\tMissing key(s)
      // ..."); a blank line (a chained exception's text follows) or the
      // program's next output ends it.
      if (l.empty() || (l[0] != ' ' && l[0] != '\t') || ++message_lines_ >= 50) {
        state_ = State::done;
        return;
      }
      break;
    case State::fatal:
      // Faulthandler lists every thread; only the one that crashed is kept
      // whole, the others by their header line.
      if (l.starts_with(kOtherThread)) {
        other_thread_ = true;
      } else if (l.starts_with(kCurrentThread) || !l.starts_with("  ")) {
        other_thread_ = false;
      } else if (other_thread_) {
        return;
      }
      break;
  }
  lines_.emplace_back(l.substr(0, kMaxBytes));
  bytes_ += lines_.back().size() + 1;
  // The oldest frames go first; the header and the exception stay.
  while (bytes_ > kMaxBytes && lines_.size() > 2) {
    bytes_ -= lines_[1].size() + 1;
    lines_.erase(lines_.begin() + 1);
    ++cut_;
  }
}

std::string TracebackCapture::text() const {
  std::string out;
  for (size_t i = 0; i < lines_.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines_[i];
    if (i == 0 && cut_ > 0) out += "\n  ... (" + std::to_string(cut_) + " lines not kept)";
  }
  return out;
}

}  // namespace cxxrun::agent
