// Every worker's stack at a hang verdict, taken before anything is killed
// and without stopping the agent's loop. Python workers dump their own
// threads: cxxrun's hook (agent/python/hook.h) registers faulthandler for
// kStackSignal in every Python process a worker starts, writing to the
// worker's stacks.txt; the agent sends the signal and reads what was
// appended, but only to a process whose hook can still take it
// (agent/hang/stack_hook.h: the same process as registered, in the worker's tree,
// its descriptor still the stacks file, the signal still caught) and that is
// not stopped by a signal (it could not run the handler until continued).
// Any other worker, a stopped one, and one whose hook wrote nothing within
// kSilentHook, is read from outside by elfutils' eu-stack (ptrace; root or the same user with ptrace
// allowed). Each rank's stack goes to <attempt dir>/hang-<n>/rank-<rank>.txt,
// one bundle per hang, in a fresh 0700 directory of 0600 files
// (agent/process/private_files.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/process/worker_env_writer.h"

namespace cxxrun::agent {

class LogDir;

// The signal cxxrun owns for stack dumps: SIGRTMIN+3 (37 with glibc). A
// realtime signal nothing else sends; a worker that already handles it keeps
// its own handler and gets no hook.
int stack_signal();

// Where torch's NCCL flight recorder writes a rank's dump, in the worker's
// attempt directory (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, which the user's own
// setting overrides); a hang's bundle copies what is there.
inline constexpr char kNcclTracePrefix[] = "nccl_trace_rank_";

// How long the whole collection may take: a dump that is not complete by
// then is taken as it is.
inline constexpr std::chrono::milliseconds kStackDeadline{3000};

class StackDump {
 public:
  StackDump(boost::asio::io_context& io, const LogDir& logs);
  ~StackDump();
  StackDump(const StackDump&) = delete;
  StackDump& operator=(const StackDump&) = delete;

  // CXXRUN_STACK_FILE and CXXRUN_STACK_SIGNAL for a new worker, and torch's
  // NCCL flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000,
  // TORCH_NCCL_DUMP_ON_TIMEOUT=1, the dump path) unless the user set them.
  // Nothing when the job keeps no log directory: there is nowhere to write.
  void add_env(EnvMap& env, int attempt, int local_rank) const;

  struct Target {
    int rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
  };
  // Rank -> stack text ("" when none could be taken), and the bundle's
  // directory ("" when there is no log directory).
  using Done = std::function<void(std::map<int, std::string> stacks, const std::string& bundle)>;
  // Takes the stacks of `targets` (attempt `attempt`), then calls `done` on
  // the loop, at most kStackDeadline later. One collection at a time: a
  // call while one runs is answered with what that one finds. `bundle`:
  // whether the stacks go to a hang bundle (a verdict's); a look that is not
  // a hang (cxxrunctl stacks) writes none and counts no hang, unless a
  // verdict's call joins it, and its `done` gets "" for the bundle.
  void collect(int attempt, const std::vector<Target>& targets, Done done, bool bundle = true);

 private:
  struct Pending;
  // The registered hook of `t` that may be signalled now (agent/hang/stack_hook.h), or 0.
  pid_t hook_to_signal(const Target& t, const std::string& file);
  void read_from_outside(size_t index, pid_t pid);
  void poll();
  void finish();
  // The bundle's directory, "" when none could be made.
  std::string write_bundle(int attempt, const std::map<int, std::string>& stacks, const Pending& p);

  boost::asio::io_context& io_;
  const LogDir& logs_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<Pending> pending_;
  int hangs_ = 0;
};

}  // namespace cxxrun::agent
