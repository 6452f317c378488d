// Hang detection through heartbeat pages (common/heartbeat_layout.h): one
// shared-memory file per worker that the worker runtime writes
// (worker_runtime/heartbeat.h) and this class reads. The one judge of a
// worker's heartbeats and sections: silence past --heartbeat-timeout, a
// section open past its declared timeout or past --section-timeout for its
// name, whichever comes first. The watchdog only acts on its verdicts. No
// thread and no I/O after create(): the watchdog calls check() from its timer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct HeartbeatViolation {
  enum class Kind { heartbeat, section };
  int local_rank = 0;
  Kind kind = Kind::heartbeat;
  std::string what;                      // "heartbeat" or the section's name
  std::chrono::nanoseconds limit{0};     // the timeout exceeded
  std::chrono::nanoseconds overdue{0};   // how far past it
  bool from_flag = false;                // the limit is --section-timeout's, not the section's own
};

// "local rank 1: no heartbeat for 12.3 s (timeout 10 s)",
// "local rank 1: section 'step' open for 40.2 s (timeout 30 s)" or, for a
// limit from the command line, "... (--section-timeout 30 s)".
std::string describe(const HeartbeatViolation& v);

struct OpenSection {
  std::string name;
  std::chrono::nanoseconds open_for{0};
  std::chrono::nanoseconds timeout{0};  // 0: no deadline
};

// What one worker last reported, for logs next to a violation.
struct HeartbeatSnapshot {
  pid_t pid = 0;       // the process that attached; 0 if none did
  uint64_t beats = 0;
  std::optional<std::chrono::nanoseconds> since_last_beat;  // empty before the first beat
  // The training step the worker last reported (cxxrun.step(), cxxrun_step())
  // and how long ago; empty before its first report.
  std::optional<uint64_t> step;
  std::optional<std::chrono::nanoseconds> since_step;
  std::vector<OpenSection> sections;
};

class HeartbeatMonitor {
 public:
  // heartbeat_timeout: longest silence allowed once a worker has beaten;
  // 0 judges no heartbeat (sections are judged by their own timeouts).
  // dir: where the pages go; "" makes a private directory under /dev/shm
  // (else $TMPDIR or /tmp), removed by the destructor. section_limits:
  // --section-timeout, the longest a section of that name may stay open
  // whatever it declared. Throws std::runtime_error when the directory
  // cannot be made. judged: whether the agent judges the pages' beats and
  // sections (--heartbeat-timeout, --section-timeout), told to each worker
  // in its page (common/heartbeat_layout.h, judged).
  explicit HeartbeatMonitor(std::chrono::nanoseconds heartbeat_timeout, const std::string& dir = "",
                            std::map<std::string, std::chrono::nanoseconds> section_limits = {},
                            bool judged = true);
  ~HeartbeatMonitor();
  HeartbeatMonitor(const HeartbeatMonitor&) = delete;
  HeartbeatMonitor& operator=(const HeartbeatMonitor&) = delete;

  // A fresh zeroed page for `local_rank`, replacing its earlier one (a new
  // file, so a straggler of the last attempt cannot write into it). Returns
  // the path to pass in CXXRUN_HEARTBEAT_FILE. Throws std::runtime_error.
  std::string create(int local_rank);
  // Unmaps and deletes one page, or all of them.
  void remove(int local_rank);
  void remove_all();

  // Every current violation, each call anew: a violation lasts until the
  // worker beats, ends the section, or its page is removed.
  // now: CLOCK_MONOTONIC time (heartbeat::monotonic_ns()).
  std::vector<HeartbeatViolation> check(std::chrono::nanoseconds now) const;
  std::vector<HeartbeatViolation> check() const;

  std::optional<HeartbeatSnapshot> snapshot(int local_rank, std::chrono::nanoseconds now) const;
  std::optional<HeartbeatSnapshot> snapshot(int local_rank) const;

  const std::string& dir() const { return dir_; }
  std::chrono::nanoseconds heartbeat_timeout() const { return heartbeat_timeout_; }

 private:
  struct Mapped {
    std::string path;
    void* page = nullptr;
  };

  std::chrono::nanoseconds heartbeat_timeout_;
  std::map<std::string, std::chrono::nanoseconds> section_limits_;
  const bool judged_;
  std::string dir_;
  bool own_dir_ = false;
  uint64_t generation_ = 0;
  std::map<int, Mapped> pages_;
};

}  // namespace cxxrun::agent
