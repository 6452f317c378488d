#include "agent/forensics/summary.h"

#include <time.h>

#include <algorithm>
#include <sstream>

#include "agent/forensics/death.h"
#include "agent/forensics/python_traceback.h"

namespace cxxrun::agent {
namespace {

std::string format_time(std::chrono::system_clock::time_point tp) {
  time_t t = std::chrono::system_clock::to_time_t(tp);
  tm local{};
  localtime_r(&t, &local);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d_%H:%M:%S", &local);
  return buf;
}

std::string indent_continuation(const std::string& text) {
  std::string out;
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out += "  ";
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

// A worker whose exec failed never had a process: its pid is 0, which would
// read as a real (and alarming) pid. The JSON record keeps the number.
std::string pid_text(const Failure& f) { return f.pid > 0 ? std::to_string(f.pid) : "not started"; }

// Whether the failure has an error file to point at: here, one that was
// written; from another node, one its message came from.
bool has_file(const Failure& f) {
  if (!f.host.empty()) return !f.message.empty() && !f.error_file.empty() && f.killed_by == Killer::none;
  return read_error_file(f.error_file).has_value();
}

std::string exit_text(const Failure& f) {
  if (f.stopped && f.killed_by == Killer::grace)
    return std::to_string(-f.signal) + " (" + signal_name(f.signal) + " from cxxrun, after the shutdown grace)";
  if (f.stopped) return std::to_string(-f.signal) + " (" + signal_name(f.signal) + " from cxxrun, after this failure)";
  if (f.signal) return std::to_string(-f.signal) + " (" + signal_name(f.signal) + ")";
  return std::to_string(f.exit_code);
}

void append_failure(std::ostringstream& os, size_t idx, const std::string& local_host, const Failure& f) {
  const std::string& host = f.host.empty() ? local_host : f.host;
  auto message = message_of(f);
  std::string traceback;
  if (message) {
    traceback = message->text;
  } else if (!f.traceback.empty()) {
    traceback = crashing_thread_text(f.traceback);
  } else if (f.signal) {
    traceback = "Signal " + std::to_string(f.signal) + " (" + signal_name(f.signal) + ") received by PID " +
                std::to_string(f.pid);
  } else {
    traceback = "<no error file written; see the last stderr lines below>";
  }
  os << "[" << idx << "]:\n"
     << "  time      : " << format_time(message && message->time ? *message->time : f.time) << "\n"
     << "  host      : " << host << "\n"
     << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ")\n"
     << "  exitcode  : " << exit_text(f) << " (pid: " << pid_text(f) << ")\n"
     << "  cause     : " << indent_continuation(explain(f)) << "\n"
     << "  error_file: " << (has_file(f) ? f.error_file : std::string("<N/A>")) << "\n"
     << "  traceback : " << indent_continuation(traceback) << "\n";
  if (!f.stderr_tail.empty()) {
    os << "  stderr (last " << f.stderr_tail.size() << " lines):\n";
    for (const auto& line : f.stderr_tail) os << "    " << line << "\n";
  }
}

}  // namespace

std::string describe(const Failure& f) {
  std::string how = f.signal ? "was killed by " + signal_name(f.signal) : "exited with code " + std::to_string(f.exit_code);
  if (f.stopped)
    how = std::string(has_file(f) || f.traceback.empty() ? "had failed (its error file is written)"
                                                         : "had failed (its traceback is out)") +
          " and was stopped with " + signal_name(f.signal);
  if (f.stopped && f.killed_by == Killer::grace)
    how = "did not stop within the shutdown grace and was killed with " + signal_name(f.signal);
  if (const Death d = cause_of(f); d != Death::exited && d != Death::not_started && !f.stopped) how += ": " + explain(f);
  const std::string pid = f.pid > 0 ? "pid " + pid_text(f) : pid_text(f);
  return (f.host.empty() ? "" : f.host + ": ") + "rank " + std::to_string(f.rank) + " (local_rank " + std::to_string(f.local_rank) + ", " +
         pid + ") " + how;
}

std::string format_summary(const std::string& entrypoint, const std::string& host,
                           const std::vector<Failure>& failures) {
  std::ostringstream others;
  if (failures.size() == 1) others << "  <NO_OTHER_FAILURES>\n";
  for (size_t i = 1; i < failures.size(); ++i) append_failure(others, i, host, failures[i]);
  std::ostringstream root;
  // torch's heading, unless the rank first listed was killed only to stop a
  // hung job: then the heading says no root cause could be named and why,
  // with where each group of ranks waits, and that failure is shown as what
  // it is.
  const std::vector<std::string>& none = failures[0].no_root_cause;
  std::string heading = "Root Cause (first observed failure):";
  if (!none.empty()) {
    heading = "Root Cause (none could be named: " + none.front() + "):";
    for (size_t i = 1; i < none.size(); ++i) root << "  " << none[i] << "\n";
    root << "First observed failure (rank " << failures[0].rank
         << ", killed only to stop the job, not as its cause):\n";
  }
  append_failure(root, 0, host, failures[0]);

  std::string title = entrypoint + " FAILED";
  size_t width = std::max(title.size(), heading.size());
  const std::string others_text = others.str(), root_text = root.str();
  for (const std::string* block : {&others_text, &root_text}) {
    std::istringstream lines(*block);
    for (std::string l; std::getline(lines, l);) width = std::max(width, l.size());
  }
  width = std::min<size_t>(width, 60);
  const std::string eq(width, '='), dash(width, '-');
  std::ostringstream os;
  os << "\n" << eq << "\n" << title << "\n" << dash << "\nFailures:\n" << others_text << dash
     << "\n" << heading << "\n" << root_text << eq << "\n";
  return os.str();
}

}  // namespace cxxrun::agent
