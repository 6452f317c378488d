// What the kernel says of one task: its scheduler state and CPU time
// (/proc/<pid>/stat), how long it waited for a CPU (/proc/<pid>/schedstat)
// and where it sleeps (/proc/<pid>/wchan). For a process's pid, stat's
// state and schedstat are its main thread's (the task whose tid is the
// pid) while stat's CPU times are the whole process's, which is what the
// sampler wants of both.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

struct TaskStat {
  char state = '?';                    // R running or runnable, S sleeping, D uninterruptible, Z zombie, ...
  unsigned long long cpu_ticks = 0;    // utime + stime, in clock ticks (sysconf(_SC_CLK_TCK))
  unsigned long long start_ticks = 0;  // starttime: a pid reused by another process starts later
};

// /proc/<pid>/stat's text. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'. nullopt when the text is not such a line.
std::optional<TaskStat> parse_task_stat(std::string_view text);

struct SchedStat {
  unsigned long long run_ns = 0;        // time on a CPU
  unsigned long long run_delay_ns = 0;  // time runnable but waiting for a CPU
};

// /proc/<pid>/schedstat's text: "run_ns run_delay_ns timeslices".
std::optional<SchedStat> parse_schedstat(std::string_view text);

// True for the states the sampler counts as waiting: S (a collective, a
// lock, a socket) and D (I/O, the kernel).
inline bool is_blocked(char state) { return state == 'S' || state == 'D'; }
// A task that is gone for the sampler's purposes: Z (exited, not reaped)
// and X (dead).
inline bool is_gone(char state) { return state == 'Z' || state == 'X'; }

// Readers of /proc/<pid>/...; nullopt when the task is gone.
std::optional<TaskStat> read_task_stat(pid_t pid);
std::optional<SchedStat> read_schedstat(pid_t pid);
// The kernel function the task sleeps in ("do_epoll_wait",
// "futex_wait_queue"); "" when running, unknown or hidden (a kernel
// without wchan support shows "0").
std::string read_wchan(pid_t pid);

}  // namespace cxxrun::agent
