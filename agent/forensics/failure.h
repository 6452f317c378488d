// One failed worker as a record (Failure): its exit status, what cxxrun did
// to it, what it and the kernel said, and when; how failures are ordered root
// cause first and shared with other nodes. Its cause is judged by
// agent/forensics/death.h; the box the user reads is agent/forensics/summary.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/forensics/killer.h"

namespace cxxrun::agent {

// What the kernel knew about a worker's memory when it ended
// (agent/forensics/postmortem.h gathers it; agent/forensics/death.h weighs it).
struct MemoryEvidence {
  bool oom_killed = false;  // the OOM killer killed this very pid
  std::string how_known;    // "its memory cgroup's OOM counter", "the kernel log"
  std::string kernel_line;  // the kernel's own OOM line, when the log was readable
  std::string cgroup;       // where its memory is accounted
  long long limit = -1;     // bytes in force on that cgroup; 0: none; -1: unknown
  std::string limit_set_on;  // the cgroup (it, or an ancestor) whose own limit that is
  long long peak = -1;      // bytes charged to its own memory cgroup at most (it and its children); -1: unknown
  long long peak_rss = -1;  // bytes: the peak resident set wait4 gave for it; -1: unknown
  // It had reaped child processes (a data loader's workers, say): wait4's
  // peak is then the largest of its own and theirs, not surely its own.
  bool peak_rss_of_children = false;
  // Then: its own peak resident set as last read while it ran (VmHWM); -1:
  // not read.
  long long own_peak_at_least = -1;
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
  // Not empty when cxxrun killed it only to stop a hung job whose stacks
  // single out no rank (agent/hang/culprit.h, Blame::cause): why no root cause
  // can be named ("no rank stands apart"), then where each group of ranks
  // waits ("ranks 0, 1 wait in all_reduce at w.py:9"). The summary then
  // says that no rank is the root cause instead of presenting this one.
  std::vector<std::string> no_root_cause;
  // What the kernel said (agent/forensics/postmortem.h).
  MemoryEvidence memory;
  std::string fault;  // the kernel's line on the fault (address, ip, library)
  bool core_dumped = false;
  std::string core;  // where the core went: a path, or the program it was piped to
  // It outlived SIGKILL: its state and kernel wait channel when given up on.
  bool unkillable = false;
  std::string wait_state;
  // The last Python traceback or faulthandler report on its stderr, whole
  // (bounded: agent/forensics/python_traceback.h), and when its first line came
  // (epoch: none).
  std::string traceback;
  std::chrono::system_clock::time_point traceback_time{};
};

// 0 for a clean exit; the exit code, or 128 + signal. Matches what a shell
// reports for the same child.
int shell_exit_code(const Failure& f);

// Decodes a waitpid() status.
void set_status(Failure& f, int wait_status);

// "12:00:01": a wall-clock time of day, local, as the log lines print it
// (a worker seen stopped, in the group's line and the hang's blame).
std::string clock_time(std::chrono::system_clock::time_point tp);

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
// The failure's message: from its error file here, or as a record from
// another node brought it (no file times then).
std::optional<ErrorFileMessage> message_of(const Failure& f);

// When the failure happened as far as the agent can tell: when the worker
// wrote its error file; else when its last traceback began, if that was at
// most kConsequenceWindow before it ended (an older one was caught and
// lived on); else (no file, or a record from another node) f.time.
std::chrono::system_clock::time_point failure_time(const Failure& f);

// What the failure says of itself, in the user's words: the exception and
// the innermost frame of the user's code from its error file or its
// traceback ("ValueError: boom; in its own code at /x/t.py:3 in main:
// ..."), else the first line of its error file's message; "" when it said
// nothing.
std::string failure_message(const Failure& f);

// The failure is a communication error (Gloo's "Connection closed by peer",
// "Connection reset by peer", a broken pipe, NCCL's remote error or abort):
// what a rank reports when a peer it talks to went away, so most often a
// consequence of another rank's failure, not a cause.
bool communication_error(const Failure& f);

// Every failure other nodes published (their records) is a communication
// error: the failure they follow may not be out yet. False for none, or
// for a record that does not parse.
bool only_communication_errors(const std::vector<std::string>& records);

// How long after a failure another one may still be the cause of it: a
// rank whose own error closes its connections (a `finally:
// destroy_process_group()`) lets its peers fail before its traceback is out.
// The supervisor keeps the group running this long after a communication
// error, for the failure it follows to arrive; order_by_time() looks this
// far.
inline constexpr std::chrono::seconds kConsequenceWindow{2};

// A rank cxxrun itself ended on a verdict (a hang, a file-timer scope that
// expired, an injected fault): while it was judged, nothing else had failed,
// so what fails around its end follows it.
bool killed_on_a_verdict(const Failure& f);

// Root cause first: earliest first by failure_time, except that
//  - a rank killed on a verdict goes before the failures of at most
//    kConsequenceWindow before it: its peers' errors come as its sockets
//    close, a moment before its own end is reaped; a verdict that blamed a
//    rank goes before one that killed a rank only to stop a hung job
//    (no_root_cause), wherever it is in the list;
//  - a communication error never goes before a failure that is not one and
//    follows it by at most kConsequenceWindow; that failure goes first.
void order_by_time(std::vector<Failure>& failures);

// A failure as a JSON record other nodes can read (the rendezvous store), and
// back. The error file's message is read here, on the failing node.
std::string to_record(const Failure& f, const std::string& host);
std::optional<Failure> from_record(const std::string& record);

// Every failure of the job, root cause first: the records other nodes
// published (this node's own among them, once published) and this node's
// failures that are not in them.
std::vector<Failure> job_failures(const std::vector<std::string>& records, const std::vector<Failure>& local,
                                  const std::string& host);

}  // namespace cxxrun::agent
