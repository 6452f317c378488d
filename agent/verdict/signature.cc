#include "agent/verdict/signature.h"

#include <cctype>

#include "agent/forensics/death.h"
#include "agent/forensics/failure.h"
#include "agent/forensics/python_traceback.h"

namespace cxxrun::agent {
namespace {

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string mib(long long bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  std::string line = text.substr(0, end);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// The exception and its innermost user frame, from the error file's
// message or the traceback on stderr (as failure_message() reads them).
bool from_traceback(const Failure& f, Signature& s) {
  const auto m = message_of(f);
  for (const std::string* text : {m ? &m->text : nullptr, &f.traceback}) {
    if (text == nullptr || text->empty()) continue;
    const auto tb = parse_traceback(*text);
    if (!tb || (tb->exception.empty() && tb->frames.empty())) continue;
    s.what = tb->exception;
    if (const PythonFrame* frame = innermost_user_frame(*tb)) s.where = frame->file + ":" + std::to_string(frame->line);
    return true;
  }
  if (m && !first_line(m->text).empty()) {
    s.what = first_line(m->text);
    return true;
  }
  return false;
}

}  // namespace

std::string collapse_numbers(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const bool hex = text.compare(i, 2, "0x") == 0 && i + 2 < text.size() &&
                     std::isxdigit(static_cast<unsigned char>(text[i + 2]));
    if (hex) {
      i += 2;
      while (i < text.size() && std::isxdigit(static_cast<unsigned char>(text[i]))) ++i;
      out += '#';
    } else if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) ||
                                 (text[i] == '.' && i + 1 < text.size() &&
                                  std::isdigit(static_cast<unsigned char>(text[i + 1])))))
        ++i;
      out += '#';
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string Signature::key() const { return cause + "|" + collapse_numbers(what) + "|" + where; }

std::string Signature::text() const {
  if (where.empty()) return what;
  // A frame is shown by its file's name; a limit as it is.
  const bool frame = where.find(':') != std::string::npos && where.rfind("limit ", 0) != 0;
  return what + " (" + (frame ? basename_of(where) : where) + ")";
}

Signature signature_of(const Failure& f) {
  const Death death = cause_of(f);
  Signature s;
  s.cause = std::string(death_name(death));
  switch (death) {
    case Death::oom_killed:
      s.what = "an OOM kill";
      if (f.memory.limit > 0) s.where = "limit " + mib(f.memory.limit);
      return s;
    case Death::killed_by_cxxrun:
      s.what = "a kill by " + std::string(killer_name(f.killed_by));
      if (!f.kill_reason.empty()) s.what += ": " + f.kill_reason;
      if (!f.no_root_cause.empty()) s.what += "; " + f.no_root_cause.front();
      return s;
    case Death::unkillable:
      s.what = "a worker that outlived SIGKILL";
      return s;
    case Death::not_started:
      s.what = "a worker that could not be executed";
      if (!f.stderr_tail.empty()) s.what += ": " + f.stderr_tail.back();
      return s;
    case Death::crashed:
    case Death::killed_by_signal: {
      Signature tb;
      from_traceback(f, tb);
      s.what = signal_name(f.signal);
      s.where = tb.where;
      return s;
    }
    case Death::exception:
    case Death::exited:
      if (from_traceback(f, s)) return s;
      s.what = "exit code " + std::to_string(f.exit_code);
      return s;
  }
  return s;
}

}  // namespace cxxrun::agent
