// A health check's command, contained. `/bin/sh -c command` runs under a
// runner, a fork of the agent that is its child subreaper: whatever the
// command starts (in the background, in a session of its own with setsid,
// by a double fork) stays in the runner's tree instead of escaping to the
// agent or to init. When the agent is done with the check, stops it, or
// dies (the runner sees the end of a pipe: SIGKILL included), the runner
// SIGKILLs the command's process group and then every process left in its
// tree, reaps them, and exits. Nothing a check starts outlives the check.
//
// The command gets what a worker gets of the agent's state: the open-files
// limit the agent was started with (agent/process/open_files.h), no blocked
// signals, SIGPIPE's default action, stdin /dev/null, and no descriptor of
// the agent's but its stdout and stderr pipes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

namespace cxxrun::agent {

class ContainedCommand {
 public:
  // Starts it; throws std::system_error (pipe, fork).
  explicit ContainedCommand(const char* command);
  // end(), unless called already.
  ~ContainedCommand();
  ContainedCommand(const ContainedCommand&) = delete;
  ContainedCommand& operator=(const ContainedCommand&) = delete;

  // The command's stdout and stderr (the read ends; -1 once closed here).
  int& out_fd() { return out_; }
  int& err_fd() { return err_; }
  // Readable when the runner has news: call read_status() then.
  int status_fd() const { return status_; }
  // Reads what is there (without blocking). The command's wait status once
  // it ended; nullopt before.
  std::optional<int> read_status();
  // The runner exited (its end of the status pipe closed) before it said
  // the command's status: the command could not be run, or the runner was
  // killed.
  bool gone() const { return runner_gone_; }

  // Kills everything the command started (the command too, if it still
  // runs) and reaps the runner. Bounded by `limit`: a runner that does not
  // finish by then (stopped, or a process of the tree stuck in the kernel)
  // is SIGKILLed with the command's group, and said so in the log.
  void end(std::chrono::milliseconds limit = std::chrono::seconds(5));

 private:
  // Reads what the runner said, and whether it closed the pipe (exited).
  bool gone_now();

  pid_t runner_ = -1;
  pid_t shell_ = -1;  // the command's process group, once the runner said it
  int out_ = -1, err_ = -1, status_ = -1, control_ = -1;
  char got_[2 * sizeof(int)] = {};  // the runner's two words: the shell's pid, then its status
  size_t have_ = 0;
  bool runner_gone_ = false;
};

}  // namespace cxxrun::agent
