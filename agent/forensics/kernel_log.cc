#include "agent/forensics/kernel_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace cxxrun::agent {
namespace {

using std::string_view;

constexpr string_view fatal_signal = "potentially unexpected fatal signal ";

std::optional<pid_t> to_pid(string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  pid_t pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  if (pid == 0) return std::nullopt;
  return pid;
}

bool contains_lowercase(string_view text, string_view lower) {
  std::string folded(text);
  std::transform(folded.begin(), folded.end(), folded.begin(), [](unsigned char c) { return std::tolower(c); });
  return folded.find(lower) != std::string::npos;
}

// The digits of "comm[N]" whose ']' is at `close`. comm comes first and may
// hold anything, '[' included, so the nearest '[' before the ']' opens N.
std::optional<pid_t> bracketed_pid(string_view text, std::size_t close) {
  const std::size_t open = text.rfind('[', close);
  if (open == string_view::npos) return std::nullopt;
  return to_pid(text.substr(open + 1, close - open - 1));
}

// The message text of a kernel-facility record: the part after the
// "pri,seq,ts,flags;" header, up to its first newline. A record user space
// wrote to /dev/kmsg never has facility 0 (the kernel makes it LOG_USER), so
// it cannot pass for the OOM killer's.
std::optional<string_view> kernel_text(string_view record) {
  const std::size_t semi = record.find(';');
  if (semi == string_view::npos) return std::nullopt;
  const string_view pri = record.substr(0, std::min(semi, record.find(',')));
  if (pri.empty() || pri.size() > 3 || !std::all_of(pri.begin(), pri.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  if (std::stoi(std::string(pri)) >= 8) return std::nullopt;
  string_view text = record.substr(semi + 1);
  return text.substr(0, text.find('\n'));
}

// mm/oom_kill.c: "<message>: Killed process %d (%s) total-vm:..." where
// <message> is "Memory cgroup out of memory" or "Out of memory" (older
// kernels: a bare "Killed process ...", after a "Kill process ... or
// sacrifice child" line that was not yet the kill).
std::optional<pid_t> oom_victim(string_view text) {
  constexpr string_view killed = "Killed process ";
  const std::size_t at = text.find(killed);
  if (at == string_view::npos) return std::nullopt;
  const string_view why = text.substr(0, at);
  if (!why.empty() && !(why.size() >= 2 && why.substr(why.size() - 2) == ": " && contains_lowercase(why, "out of memory")))
    return std::nullopt;
  const string_view rest = text.substr(at + killed.size());
  const std::size_t comm = rest.find(" (");
  if (comm == string_view::npos) return std::nullopt;
  return to_pid(rest.substr(0, comm));
}

// arch/x86/kernel/traps.c, show_signal(): "traps: %s[%d] %s%s ip:%lx sp:%lx
// error:%lx in ..." (type "trap " and a description, or "general protection
// fault"). Kernels without the "traps: " prefix are matched by the
// description.
std::optional<pid_t> trap_pid(string_view text) {
  constexpr string_view prefix = "traps: ";
  const bool prefixed = text.substr(0, prefix.size()) == prefix;
  if (prefixed) text.remove_prefix(prefix.size());
  const std::size_t ip = text.find(" ip:");
  if (ip == string_view::npos || text.find(" sp:", ip) == string_view::npos ||
      text.find(" error:", ip) == string_view::npos)
    return std::nullopt;
  for (std::size_t close = text.find("] "); close < ip; close = text.find("] ", close + 1)) {
    const auto pid = bracketed_pid(text, close);
    if (!pid) continue;
    const string_view desc = text.substr(close + 2);
    if (prefixed || desc.substr(0, 5) == "trap " || desc.substr(0, 18) == "general protection") return pid;
  }
  return std::nullopt;
}

// The faulting thread: arch/x86/mm/fault.c's "%s[%d]: segfault at ...",
// arm64's "%s[%d]: unhandled ...", the traps above, and kernel/signal.c's
// print_fatal_signal(): "%s/%d: potentially ..." (2.6), "potentially ..."
// (since), "%pD: %s: potentially ..." (recent: exe and comm, no pid). 0 for
// the last two.
std::optional<pid_t> faulting_pid(string_view text) {
  for (string_view marker : {string_view("]: segfault at "), string_view("]: unhandled ")}) {
    const std::size_t at = text.find(marker);
    if (at != string_view::npos) return bracketed_pid(text, at);
  }
  if (auto pid = trap_pid(text)) return pid;
  if (text.substr(0, fatal_signal.size()) == fatal_signal) return 0;
  const std::size_t at = text.find(std::string(": ") + std::string(fatal_signal));
  if (at == string_view::npos) return std::nullopt;
  const string_view who = text.substr(0, at);
  const std::size_t slash = who.rfind('/');
  if (slash != string_view::npos)
    if (auto pid = to_pid(who.substr(slash + 1))) return pid;
  return 0;
}

bool is_fatal_signal_line(const KernelEvent& e) {
  return e.kind == KernelEvent::Kind::fault && e.text.find(fatal_signal) != std::string::npos;
}

// How many records after a pid-less fatal-signal line its register dump may
// come (other CPUs' records can come between).
constexpr int register_dump_window = 16;
constexpr int records_per_poll = 10000;
// One /dev/kmsg record is at most CONSOLE_EXT_LOG_MAX (8 KiB); a smaller
// buffer gets EINVAL and never gets past that record.
constexpr std::size_t read_size = 16384;
// A regular file's line without a newline longer than this is not a record.
constexpr std::size_t max_line = 65536;

bool dmesg_restricted() {
  std::ifstream in("/proc/sys/kernel/dmesg_restrict");
  int value = 0;
  return in >> value && value != 0;
}

}  // namespace

std::optional<KernelEvent> parse_kernel_record(string_view record) {
  const auto text = kernel_text(record);
  if (!text) return std::nullopt;
  if (auto pid = oom_victim(*text)) return KernelEvent{KernelEvent::Kind::oom_kill, *pid, std::string(*text)};
  if (auto pid = faulting_pid(*text)) return KernelEvent{KernelEvent::Kind::fault, *pid, std::string(*text)};
  return std::nullopt;
}

bool memory_cgroup_oom(const KernelEvent& event) {
  return event.kind == KernelEvent::Kind::oom_kill && event.text.find("Memory cgroup out of memory") != std::string::npos;
}

std::optional<pid_t> register_dump_pid(string_view text) {
  if (text.substr(0, 5) != "CPU: ") return std::nullopt;
  constexpr string_view key = " PID: ";
  const std::size_t at = text.find(key);
  if (at == string_view::npos) return std::nullopt;
  const string_view rest = text.substr(at + key.size());
  return to_pid(rest.substr(0, rest.find(' ')));
}

std::unique_ptr<KernelLog> KernelLog::open(std::string& why_not, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == EPERM || err == EACCES) {
      // EPERM is the kernel's syslog check (dmesg_restrict without
      // CAP_SYSLOG); EACCES the file's own mode.
      if (err == EPERM && dmesg_restricted())
        why_not = "the kernel log (" + path + ") is not readable: kernel.dmesg_restrict=1 and cxxrun " +
                  (geteuid() == 0 ? "lacks CAP_SYSLOG (a container's root)" : "is not root (CAP_SYSLOG)");
      else
        why_not = "the kernel log (" + path + ") is not readable: " + strerror(err);
    } else if (err == ENOENT) {
      why_not = "no " + path + " here (a container without it)";
    } else {
      why_not = "cannot open the kernel log (" + path + "): " + strerror(err);
    }
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || lseek(fd, 0, SEEK_END) < 0) {
    why_not = "cannot read the kernel log (" + path + ") from its end: " + strerror(errno);
    ::close(fd);
    return nullptr;
  }
  // Some container runtimes put /dev/null where /dev/kmsg should be: it
  // would read as a log where nothing ever happens.
  if (S_ISCHR(st.st_mode) && st.st_rdev != makedev(1, 11)) {
    why_not = path + " here is not the kernel log (a container's stand-in for it)";
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<KernelLog>(new KernelLog(fd, S_ISCHR(st.st_mode)));
}

KernelLog::~KernelLog() { ::close(fd_); }

void KernelLog::poll() {
  int budget = records_per_poll;
  if (records_)
    read_records(budget);
  else
    read_lines(budget);
}

// /dev/kmsg: each read() returns one whole record; EAGAIN is the end.
void KernelLog::read_records(int& budget) {
  std::string buf(read_size, '\0');
  while (budget > 0) {
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n > 0) {
      take(string_view(buf.data(), static_cast<std::size_t>(n)));
      --budget;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EPIPE) {
      // The ring buffer wrapped past us; the next read() resumes at the
      // oldest record still there.
      ++overwritten_;
    } else {
      return;  // EAGAIN: nothing more now; anything else: nothing readable
    }
  }
}

// A regular file (tests): records one per line; lines starting with a space
// continue the record before them and say nothing we use.
void KernelLog::read_lines(int& budget) {
  std::string buf(read_size, '\0');
  for (;;) {
    std::size_t start = 0;
    for (std::size_t nl; budget > 0 && (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      const string_view line(partial_.data() + start, nl - start);
      if (line.empty() || line[0] == ' ') continue;
      take(line);
      --budget;
    }
    partial_.erase(0, start);
    if (budget <= 0) return;
    if (partial_.size() > max_line) partial_.clear();
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n > 0)
      partial_.append(buf.data(), static_cast<std::size_t>(n));
    else if (!(n < 0 && errno == EINTR))
      return;
  }
}

void KernelLog::take(string_view record) {
  std::optional<KernelEvent> event = parse_kernel_record(record);
  if (unattributed_) {
    const auto text = kernel_text(record);
    const auto pid = text && !event ? register_dump_pid(*text) : std::nullopt;
    if (pid) {
      unattributed_->pid = *pid;
      remember(std::move(*unattributed_));
      unattributed_.reset();
      return;
    }
    if (event || --unattributed_wait_ <= 0) unattributed_.reset();
  }
  if (!event) return;
  if (event->pid == 0) {
    unattributed_ = std::move(event);
    unattributed_wait_ = register_dump_window;
    return;
  }
  remember(std::move(*event));
}

void KernelLog::remember(KernelEvent event) {
  events_.push_back(std::move(event));
  while (events_.size() > max_events) events_.pop_front();
}

std::optional<KernelEvent> KernelLog::find(pid_t pid, KernelEvent::Kind kind) const {
  std::optional<KernelEvent> found;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (it->pid != pid || it->kind != kind) continue;
    if (!is_fatal_signal_line(*it)) return *it;
    if (!found) found = *it;
  }
  return found;
}

std::vector<KernelEvent> KernelLog::recent(KernelEvent::Kind kind) const {
  std::vector<KernelEvent> out;
  for (const KernelEvent& e : events_)
    if (e.kind == kind) out.push_back(e);
  return out;
}

void KernelLog::forget(pid_t pid) {
  events_.erase(std::remove_if(events_.begin(), events_.end(), [pid](const KernelEvent& e) { return e.pid == pid; }),
                events_.end());
}

}  // namespace cxxrun::agent
