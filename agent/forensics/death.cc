#include "agent/forensics/death.h"

#include <signal.h>

#include <fmt/format.h>

#include <algorithm>

#include "agent/forensics/failure.h"
#include "agent/forensics/library_file.h"
#include "agent/forensics/memory_cgroup.h"
#include "agent/forensics/python_traceback.h"

namespace cxxrun::agent {
namespace {

bool crash_signal(int sig) {
  switch (sig) {
    case SIGSEGV:
    case SIGBUS:
    case SIGABRT:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS: return true;
  }
  return false;
}

// What a Python interpreter prints for an uncaught exception, in the lines
// the agent kept: the worker wrote no error file but did raise.
bool traceback_on_stderr(const Failure& f) {
  if (f.traceback.starts_with("Traceback (most recent call last):")) return true;
  return std::any_of(f.stderr_tail.begin(), f.stderr_tail.end(), [](const std::string& line) {
    return line.find("Traceback (most recent call last):") != std::string::npos;
  });
}

// A failure from another node carries its error file's message; one from
// here has the file itself.
bool has_error_report(const Failure& f) { return !f.message.empty() || read_error_file(f.error_file).has_value(); }


// "limit 512 MiB on memory cgroup /x; peak 511 MiB"
std::string memory_facts(const MemoryEvidence& m) {
  std::string out;
  if (m.limit > 0)
    out = "memory limit " + format_bytes(m.limit) +
          (m.limit_set_on.empty() ? (m.cgroup.empty() ? "" : " on memory cgroup " + m.cgroup)
                                  : " set on memory cgroup " + m.limit_set_on);
  else if (m.limit == 0)
    out = "no memory limit on its cgroups" + (m.cgroup.empty() ? "" : " (" + m.cgroup + ")");
  if (m.peak >= 0) out += (out.empty() ? "" : "; ") + ("peak " + format_bytes(m.peak) + " charged to its memory cgroup");
  // wait4's peak is the largest of the worker's and its reaped children's.
  if (m.peak_rss >= 0)
    out += (out.empty() ? "" : "; ") +
           (m.peak_rss_of_children ? "peak RSS " + format_bytes(m.peak_rss) +
                                         " of it or one of the child processes it reaped (wait4 does not tell which)"
                                   : "its own peak RSS " + format_bytes(m.peak_rss));
  if (m.peak_rss >= 0 && m.peak_rss_of_children && m.own_peak_at_least > 0)
    out += "; its own peak RSS at least " + format_bytes(m.own_peak_at_least) + " (read while it ran)";
  return out;
}

std::string oom_text(const Failure& f) {
  const MemoryEvidence& m = f.memory;
  std::string out = fmt::format("the kernel's OOM killer killed pid {}", f.pid);
  if (!m.how_known.empty()) out += " (" + m.how_known + ")";
  if (m.limit == 0) out += "; the machine ran out of memory";
  if (const std::string facts = memory_facts(m); !facts.empty()) out += "; " + facts;
  return out;
}

// For a SIGKILL nobody in cxxrun sent: what the memory evidence says, and
// what it cannot.
std::string sigkill_text(const Failure& f) {
  const MemoryEvidence& m = f.memory;
  if (m.shared_oom_kills > 0)
    return fmt::format("; memory cgroup {} counted {} OOM kill{} while it ran, but other processes share it, so "
                       "whether this rank was one is not known{}",
                       m.cgroup, m.shared_oom_kills, m.shared_oom_kills == 1 ? "" : "s",
                       m.missing.empty() ? "" : " (" + m.missing + ")");
  if (!m.missing.empty()) return "; whether the OOM killer sent it is not known: " + m.missing;
  std::string out = "; the OOM killer did not kill it";
  if (const std::string facts = memory_facts(m); !facts.empty()) out += " (" + facts + ")";
  return out;
}

// A worker that lived on to fail after the OOM killer took a child of it.
std::string children_text(const Failure& f) {
  const MemoryEvidence& m = f.memory;
  if (m.child_oom_kills <= 0) return "";
  std::string out = fmt::format("; the OOM killer killed {} of its child processes", m.child_oom_kills);
  if (const std::string facts = memory_facts(m); !facts.empty()) out += " (" + facts + ")";
  return out;
}

// Where faulthandler saw the thread that crashed.
std::string crashed_thread_text(const Failure& f) {
  const auto tb = parse_traceback(f.traceback);
  if (!tb || !tb->fatal) return "";
  const PythonFrame* frame = innermost_user_frame(*tb);
  if (!frame) return "; faulthandler: the thread that crashed ran no Python code";
  std::string out = python_library_file(frame->file) ? "; faulthandler: the thread that crashed was at "
                                              : "; faulthandler: the thread that crashed was in its own code at ";
  out += frame->file + ":" + std::to_string(frame->line);
  if (!frame->function.empty()) out += " in " + frame->function;
  return out;
}

std::string crash_text(const Failure& f) {
  std::string out = signal_name(f.signal);
  out += crashed_thread_text(f);
  out += f.fault.empty() ? "" : "; " + f.fault;
  if (f.core_dumped) out += "; core dumped" + (f.core.empty() ? "" : " " + f.core);
  else if (!f.core.empty()) out += "; " + f.core;
  return out;
}

}  // namespace

std::string_view death_name(Death d) {
  switch (d) {
    case Death::exited: return "exited";
    case Death::exception: return "exception";
    case Death::crashed: return "crashed";
    case Death::killed_by_signal: return "killed-by-signal";
    case Death::killed_by_cxxrun: return "killed-by-cxxrun";
    case Death::oom_killed: return "oom-killed";
    case Death::unkillable: return "unkillable";
    case Death::not_started: break;
  }
  return "not-started";
}

Death cause_of(const Failure& f) {
  if (f.unkillable) return Death::unkillable;
  if (f.pid <= 0) return Death::not_started;
  if (f.memory.oom_killed) return Death::oom_killed;
  if (f.killed_by != Killer::none) return Death::killed_by_cxxrun;
  // A worker the agent stopped while it was exiting on its own, its
  // traceback already out, failed of that exception.
  if (has_error_report(f) || (f.stopped && traceback_on_stderr(f))) return Death::exception;
  if (f.signal) return crash_signal(f.signal) ? Death::crashed : Death::killed_by_signal;
  return traceback_on_stderr(f) ? Death::exception : Death::exited;
}

std::string explain(const Failure& f) {
  const Death d = cause_of(f);
  std::string out(death_name(d));
  switch (d) {
    case Death::exited: return out + " " + std::to_string(f.exit_code) + children_text(f);
    case Death::exception: {
      const std::string message = failure_message(f);
      const std::string said = message.empty() ? "" : ": " + message;
      if (f.signal)
        return out + ": it reported an error, then " + signal_name(f.signal) + " from cxxrun stopped it" + said;
      return out + ": " + (has_error_report(f) ? "its error file" : "a Python traceback on stderr") + said +
             children_text(f);
    }
    case Death::crashed: return out + ": " + crash_text(f);
    case Death::killed_by_signal:
      return out + ": " + signal_name(f.signal) + ", not sent by cxxrun" + (f.signal == SIGKILL ? sigkill_text(f) : "");
    case Death::killed_by_cxxrun: {
      out += ": " + std::string(killer_name(f.killed_by));
      if (!f.kill_reason.empty()) out += ": " + f.kill_reason;
      // A worker may handle the signal it was sent and exit on its own.
      return out + (f.signal ? "; ended by " + signal_name(f.signal) : "; it then exited " + std::to_string(f.exit_code));
    }
    case Death::oom_killed: return out + ": " + oom_text(f);
    case Death::unkillable: return out + ": alive after SIGKILL; " + f.wait_state;
    case Death::not_started: return out + ": it could not be executed";
  }
  return out;
}

}  // namespace cxxrun::agent
