// torchrun's file-timer watchdog server (docs/torchrun-compat.md §10.4), opt-in with
// TORCHELASTIC_ENABLE_FILE_TIMER=1. Workers (torch's FileTimerClient, or any
// program) write one JSON line per request to a FIFO whose path they get in
// TORCHELASTIC_TIMER_FILE:
//   {"version": 1, "pid": 123, "scope_id": "s", "expiration_time": 1700000000.5, "signal": 9}
// expiration_time is seconds since the epoch; a negative one releases the
// scope. When a scope expires the server's owner kills the pid with that
// signal. This class only keeps the timers: the supervisor watches fd() for
// readability, calls on_readable(), and polls expired() from a timer.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cxxrun::agent {

struct TimerExpiry {
  pid_t pid = 0;
  std::string scope_id;
  int signal = 0;  // <= 0: torch does not kill the pid, only reports it
  double expiration_time = 0;
};

class FileTimerServer {
 public:
  // Makes the FIFO at `path` (an existing file there is replaced, as torch
  // does), or with path "" at <private temp dir>/watchdog_timer_<random>,
  // removed by the destructor. Throws std::runtime_error.
  explicit FileTimerServer(const std::string& path = "");
  ~FileTimerServer();
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  // Null unless env has TORCHELASTIC_ENABLE_FILE_TIMER=1; the FIFO is at
  // TORCHELASTIC_TIMER_FILE when that is set.
  static std::unique_ptr<FileTimerServer> from_environment(const std::map<std::string, std::string>& env);

  // For workers: TORCHELASTIC_TIMER_FILE=path().
  const std::string& path() const { return path_; }
  // Non-blocking read end; it never reports EOF (the server holds a writer).
  int fd() const { return read_fd_; }

  // Reads everything available and applies each complete line; a partial
  // line waits for its end, a malformed one is logged and skipped.
  void on_readable();

  // The timers expired at `now` (seconds since the epoch), one per pid as
  // torch picks it: the earliest expired with a signal > 0, else the
  // earliest. All timers of those pids are dropped, so each is reported once
  // and a reused pid is never killed for its predecessor.
  std::vector<TimerExpiry> expired(double now);
  std::vector<TimerExpiry> expired();

  // Drops the timers of a pid that exited, or all of them (a new attempt).
  void forget(pid_t pid);
  void clear() { timers_.clear(); }
  size_t active() const { return timers_.size(); }

 private:
  void apply(const std::string& line);

  std::string path_;
  std::string own_dir_;  // "" when the path was given
  int read_fd_ = -1;
  int keep_open_fd_ = -1;
  std::string partial_;
  // Keyed like torch's (pid, scope_id): a new request replaces the old.
  std::map<std::pair<pid_t, std::string>, TimerExpiry> timers_;
};

}  // namespace cxxrun::agent
