// What the user is told when workers fail: torchrun's ChildFailedError box
// (docs/torchrun-compat.md §10.2) plus the signal name and the last lines of stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/death.h"

namespace cxxrun::agent {

// What the kernel knew about a worker's memory when it ended
// (agent/postmortem.h gathers it; agent/death.h weighs it).
struct MemoryEvidence {
  bool oom_killed = false;  // the OOM killer killed this very pid
  std::string how_known;    // "its memory cgroup's OOM counter", "the kernel log"
  std::string kernel_line;  // the kernel's own OOM line, when the log was readable
  std::string cgroup;       // where its memory is accounted
  long long limit = -1;     // bytes in force on that cgroup; 0: none; -1: unknown
  std::string limit_set_on;  // the cgroup (it, or an ancestor) whose own limit that is
  long long peak = -1;      // bytes charged to its own memory cgroup at most (it and its children); -1: unknown
  long long peak_rss = -1;  // bytes: its own peak resident set (wait4); -1: unknown
  // The cgroup is shared with other processes: its OOM counter rose by this
  // much while the worker ran, but cannot say whom the kernel killed.
  long long shared_oom_kills = 0;
  // It lived on, but the OOM killer killed this many of its children (a
  // data loader, say) in its own memory cgroup.
  long long child_oom_kills = 0;
  std::string missing;  // why evidence is missing ("" when complete)
};

struct Failure {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;       // 0: never started (its exec failed)
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // killed by this signal
  std::chrono::system_clock::time_point time;
  std::string error_file;  // path given to the worker; may not exist
  std::vector<std::string> stderr_tail;
  // Set for a failure on another node (read from the rendezvous store):
  // its host and the error file's message, which cannot be read from here.
  std::string host;
  std::string message;
  // Killed by the agent's stop signal after it had written its error file:
  // it failed on its own first, so it is listed, but its exit status is
  // ours and says nothing about it.
  bool stopped = false;
  // cxxrun killed it (or asked for the signal): which part, and why in
  // words ("no heartbeat for 10 s", "file-timer scope 'step' expired").
  Killer killed_by = Killer::none;
  std::string kill_reason;
  // What the kernel said (agent/postmortem.h).
  MemoryEvidence memory;
  std::string fault;  // the kernel's line on the fault (address, ip, library)
  bool core_dumped = false;
  std::string core;  // where the core went: a path, or the program it was piped to
  // It outlived SIGKILL: its state and kernel wait channel when given up on.
  bool unkillable = false;
  std::string wait_state;
};

// 0 for a clean exit; the exit code, or 128 + signal. Matches what a shell
// reports for the same child.
int shell_exit_code(const Failure& f);

// Decodes a waitpid() status.
void set_status(Failure& f, int wait_status);

// "SIGSEGV" for 11; "signal 99" for unknown numbers.
std::string signal_name(int sig);

// The message from a torchelastic error file: py_callstack if present, else
// the message text. nullopt when missing or unreadable.
struct ErrorFileMessage {
  std::string text;
  // The file's own timestamp, shown as torch shows it (seconds for torch's files).
  std::optional<std::chrono::system_clock::time_point> time;
  // When the worker wrote it, as precisely as known: cxxrun's timestamp_ns,
  // else the file's modification time. What failures are ordered by.
  std::optional<std::chrono::system_clock::time_point> written;
};
std::optional<ErrorFileMessage> read_error_file(const std::string& path);

// When the failure happened as far as the agent can tell: when the worker
// wrote its error file, else (no file, or a record from another node) f.time.
std::chrono::system_clock::time_point failure_time(const Failure& f);

// Earliest first by failure_time: the root cause goes first even when its
// victims were reaped before it.
void order_by_time(std::vector<Failure>& failures);

// One line for the log: "rank 1 (local_rank 1, pid 42) exited with code 3";
// "(local_rank 1, not started)" for a worker that never had a pid.
std::string describe(const Failure& f);

// A failure as a JSON record other nodes can read (the rendezvous store), and
// back. The error file's message is read here, on the failing node.
std::string to_record(const Failure& f, const std::string& host);
std::optional<Failure> from_record(const std::string& record);

// Every failure of the job, root cause first: the records other nodes
// published (this node's own among them, once published) and this node's
// failures that are not in them.
std::vector<Failure> job_failures(const std::vector<std::string>& records, const std::vector<Failure>& local,
                                  const std::string& host);

// The summary box. `failures` is non-empty; failures[0] is the root cause.
// A worker that never started shows "(pid: not started)".
std::string format_summary(const std::string& entrypoint, const std::string& host,
                           const std::vector<Failure>& failures);

}  // namespace cxxrun::agent
