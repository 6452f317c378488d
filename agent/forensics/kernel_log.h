// What the kernel said about a worker's death: the OOM killer's line and the
// line a user-space fault leaves (segfault, general protection, a trap),
// read from /dev/kmsg without ever blocking the agent's loop.
//
// Reading /dev/kmsg needs root (CAP_SYSLOG) where kernel.dmesg_restrict=1,
// the default of most distributions; KernelLog::open() then says so, and the
// caller reports the evidence as missing rather than guessing.
//
// Pids are the kernel's: the OOM killer names the process it killed, but a
// fault line names the faulting *thread* (comm[tid]). A worker that crashes
// in a thread other than its main one (a data loader, a NCCL thread) is
// named by that thread's id, which find(worker_pid) cannot match; recent()
// lets the caller look further. Nothing here logs; it returns text.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

struct KernelEvent {
  enum class Kind { oom_kill, fault } kind;
  // The process the OOM killer killed, or the thread that faulted. 0 only in
  // what parse_kernel_record() returns for a "potentially unexpected fatal
  // signal" line of a kernel that does not print the pid there.
  pid_t pid;
  // The kernel's own message text, without the record's "pri,seq,ts,flags;"
  // prefix or its continuation lines: "Memory cgroup out of memory: Killed
  // process 1234 (python3) total-vm:...", "python3[25768]: segfault at 0 ip
  // 00007fbada929ad8 sp ... error 4 in libc.so.6[...]". Non-printable bytes
  // stay as the kernel escaped them (\xNN).
  std::string text;
};

// One /dev/kmsg record ("6,352,10307838837,-;text\n" and any continuation
// lines, which start with a space and are ignored) to the event it reports,
// or nullopt for every other record. Pure. Recognised:
//   OOM kills, "<why>: Killed process N (comm) ..." where <why> says out of
//     memory ("Memory cgroup out of memory", "Out of memory", "Out of memory
//     (oom_kill_allocating_task)"), and the bare "Killed process N (comm)"
//     of older kernels. "oom_reaper: reaped process N" is not a kill.
//   faults, "comm[N]: segfault at ...", "traps: comm[N] general protection
//     fault ip:... sp:... error:...", "traps: comm[N] trap divide error
//     ip:...", arm64's "comm[N]: unhandled ...", and the "potentially
//     unexpected fatal signal S." lines of kernel.print-fatal-signals
//     ("comm/N: ..." in 2.6 kernels; without the pid since, when pid is 0).
// Only kernel-facility records count (pri < 8): user space writing to
// /dev/kmsg cannot forge one.
std::optional<KernelEvent> parse_kernel_record(std::string_view record);

// The OOM kill was a memory cgroup's ("Memory cgroup out of memory: ..."),
// not the whole machine's ("Out of memory: ..."). False for faults, and for
// older kernels' bare "Killed process" line, which did not say.
bool memory_cgroup_oom(const KernelEvent& event);

// The pid in the first line of a register dump, "CPU: 3 UID: 0 PID: 1234
// Comm: python3 ..." (older kernels print no UID): how a pid-less
// fatal-signal line is attributed. Pure.
std::optional<pid_t> register_dump_pid(std::string_view text);

class KernelLog {
 public:
  // Opens the log (O_RDONLY|O_NONBLOCK|O_CLOEXEC) positioned at its end:
  // only what the kernel writes from now on is read. `path` may be a regular
  // file in tests, read as records one per line, also from its end.
  // nullptr when it cannot, with the reason in `why_not` in the user's words
  // ("the kernel log (/dev/kmsg) is not readable: kernel.dmesg_restrict=1 and
  // cxxrun is not root (CAP_SYSLOG)", "no /dev/kmsg here (a container without
  // it)", "/dev/kmsg here is not the kernel log (a container's stand-in for
  // it)" for another character device, /dev/null say). Never throws.
  static std::unique_ptr<KernelLog> open(std::string& why_not, const std::string& path = "/dev/kmsg");
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  // Reads every record written since the last call, never blocking, at most
  // 10000 records a call (the rest wait for the next). Records the kernel
  // overwrote before they were read are counted in overwritten() and skipped.
  // Never throws (but std::bad_alloc).
  void poll();

  // The latest event of `kind` about `pid` seen by poll() so far. A
  // "potentially unexpected fatal signal" line, which says less, never hides
  // a fault line about the same pid seen before it.
  std::optional<KernelEvent> find(pid_t pid, KernelEvent::Kind kind) const;
  // Every remembered event of `kind`, oldest first: for a caller that knows a
  // worker crashed but finds no line under its pid (a thread faulted).
  std::vector<KernelEvent> recent(KernelEvent::Kind kind) const;
  // Drops what is remembered about `pid` (once reported; pids are reused).
  void forget(pid_t pid);
  // How many times the kernel overwrote records before they were read (its
  // ring buffer wrapped between two polls): evidence may be missing.
  std::uint64_t overwritten() const { return overwritten_; }

  // How many events are remembered at most; the oldest go first.
  static constexpr std::size_t max_events = 1024;

 private:
  KernelLog(int fd, bool records) : fd_(fd), records_(records) {}
  void take(std::string_view record);
  void remember(KernelEvent event);
  void read_records(int& budget);
  void read_lines(int& budget);

  int fd_;
  bool records_;                // a character device: one record per read()
  std::string partial_;         // a regular file: bytes after the last newline
  std::deque<KernelEvent> events_;
  std::optional<KernelEvent> unattributed_;  // a fatal-signal line awaiting its register dump
  int unattributed_wait_ = 0;                // records left to find that dump in
  std::uint64_t overwritten_ = 0;
};

}  // namespace cxxrun::agent
