// What the agent learns from the kernel about a worker after it ended:
// whether the OOM killer killed that very process, the memory limit in force
// and its peak, and for a crash the kernel's fault line and where the core
// went. It fills a Failure's evidence; agent/forensics/death.h weighs it.
//
// Per-rank attribution, by what each layout offers (docs/exit-codes.md):
//   - a memory cgroup of the rank's own, where the agent may make one (cgroup
//     v1 memory, the hybrid layout included, as root): its OOM counter counts
//     that rank and its children only, and its peak is theirs;
//   - the kernel log (/dev/kmsg, root or CAP_SYSLOG), which names the pid the
//     OOM killer killed and the thread that faulted;
//   - otherwise the memory cgroup the worker ran in, shared with others: a
//     rise of its OOM counter is reported as such, never pinned on a rank.
// The peak RSS comes from wait4(), with no cgroup at all: the worker's own,
// or one of the children it reaped (Failure::memory.peak_rss_of_children).
//
// Passive and non-blocking: the worker group calls it on the agent's loop.
#pragma once

#include <sys/types.h>

#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/forensics/failure.h"

namespace cxxrun::agent {

class KernelLog;
struct KernelEvent;
class MemoryCgroups;

class Postmortem {
 public:
  // Finds the memory controller and opens the kernel log; what it cannot
  // have is kept as the reason evidence will be missing.
  explicit Postmortem(const std::string& job_token);
  ~Postmortem();
  Postmortem(const Postmortem&) = delete;
  Postmortem& operator=(const Postmortem&) = delete;

  // Where a new worker's memory should be accounted: an open descriptor of
  // its own memory cgroup's cgroup.procs (the caller writes the pid, or the
  // child "0", and closes it), or -1 where there can be none.
  int rank_cgroup(int attempt, int local_rank);
  // A worker started (and joined its rank cgroup, if any): remembers where
  // its memory is accounted and that cgroup's OOM counter now.
  void started(int local_rank, pid_t pid);
  // Reads the worker's own peak resident memory so far (VmHWM): what it
  // was at least, when wait4's peak may be a child's; and its threads, whose
  // ids the kernel's fault line may name instead of its pid.
  void sample(pid_t pid);
  // Fills `f`'s memory, fault and core evidence. `wait_status` as waitpid
  // gave it; `peak_rss` its peak from wait4 in bytes (-1: unknown), which
  // is the largest of its own and its reaped children's when
  // `of_children` (had_reaped_children()).
  void examine(Failure& f, int wait_status, long long peak_rss, bool of_children);
  // The attempt is over: its rank cgroups go.
  void end_attempt(int attempt);
  // A worker outlived SIGKILL: its rank cgroup is left behind at exit.
  void abandon();
  // Where the per-rank memory cgroups go, for the guardian to remove after
  // the agent died ("" when there can be none).
  std::string memory_dir() const;

 private:
  struct Watched {
    std::string cgroup;
    bool own = false;
    long long oom_kills_at_start = -1;  // -1: no counter
    long long own_peak = -1;  // bytes: its VmHWM as last sampled
    // Its threads as last sampled: the kernel logs a fault under the id of
    // the thread that faulted.
    std::set<pid_t> threads;
    std::string comm, cwd;  // for the core file's name
  };

  // The kernel's fault line under one of `w`'s threads' ids.
  std::optional<KernelEvent> thread_fault(const Watched& w) const;

  std::unique_ptr<MemoryCgroups> memory_;
  std::unique_ptr<KernelLog> kernel_;
  std::string no_kernel_log_;  // why there is no kernel log
  std::string no_rank_cgroup_;  // why ranks share a memory cgroup
  std::map<pid_t, Watched> watched_;
  // The memory cgroup made for each local rank this attempt, and its OOM
  // counter then (-1: none), before its worker joined it.
  struct RankCgroup {
    std::string dir;
    long long oom_kills = -1;
  };
  std::map<int, RankCgroup> rank_cgroups_;
};

// Whether `pid`, ended but not yet reaped, had reaped children of its own
// (or had, before an exec): their page faults count in its cminflt and
// cmajflt (/proc/<pid>/stat), and their peak in what wait4 gives for it.
bool had_reaped_children(pid_t pid);
// The same from that file's text. A read that fails (the process was reaped
// meanwhile by another thread: ESRCH, which libstdc++'s filebuf throws) is
// "no": the caller must never die of it.
bool had_reaped_children(std::istream& stat_file);

// Why the kernel log has no fault line for crashed worker `f` (read from
// its evidence: faulthandler's report on its stderr): the fault text then.
std::string missing_fault_line(const Failure& f);

// Where a core file of process `pid` (command `comm`) went, from
// kernel.core_pattern: "core dumped to /cwd/core.42", "core dumped, piped
// to /usr/lib/systemd/systemd-coredump (coredumpctl)". `dumped`: the wait
// status said so; when not, why not where it is known ("no core file: the
// core size limit is 0 (ulimit -c)"), else "". Pure but for `cwd`.
std::string core_text(bool dumped, const std::string& pattern, pid_t pid, const std::string& comm,
                      const std::string& cwd, long long core_limit);

}  // namespace cxxrun::agent
