// The checks a node runs on itself before a round that need no GPU: a
// site's own command, paths that must be writable with free space, and the
// host's RDMA ports. Each is bounded and says its verdict in one line of the
// words an admin would search for. agent/health/node_health.h decides which run
// when; the GPU checks are in agent/health/gpu_health.h.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "agent/config.h"

namespace cxxrun::agent {

struct CheckResult {
  std::string name;  // "command", "path /scratch", "rdma", "gpu-answers", ... (agent/health/gpu_health.h)
  bool healthy = true;
  std::string detail;  // one line
  std::chrono::milliseconds took{0};
  // Ended by CheckStop::stop(), not by a verdict: neither healthy nor not.
  bool stopped = false;
};

// How the agent ends the checks in flight when it exits (a signal): stop()
// makes a running check_command end at once, with everything it started
// killed, and every later check return at once, `stopped`.
class CheckStop {
 public:
  CheckStop();  // throws std::system_error (pipe)
  ~CheckStop();
  CheckStop(const CheckStop&) = delete;
  CheckStop& operator=(const CheckStop&) = delete;

  // Any thread, any number of times.
  void stop();
  bool stopped() const { return stopped_.load(); }
  // Readable once stopped, for poll().
  int fd() const { return pipe_[0]; }

 private:
  int pipe_[2] = {-1, -1};
  std::atomic<bool> stopped_{false};
};

// --health-check: `/bin/sh -c command`, contained (agent/health/check_runner.h):
// whatever it starts is killed when it ends, at `timeout`, or at `stop`.
// Exit 0 is healthy; otherwise the detail is the first line it printed
// (stdout, else stderr; control characters shown escaped, "\x1b", so that
// they cannot act on the terminal that reads the log) and its exit status.
// Its status comes back through a pipe, not waitpid, so an agent loop
// reaping every child (a subreaper) cannot take it first.
CheckResult check_command(const std::string& command, std::chrono::milliseconds timeout,
                          const CheckStop* stop = nullptr);

// --health-path: a file can be created, written and removed in `p.path`,
// and its file system has at least p.min_free bytes free. On a thread of
// its own, given up after `timeout` (or at `stop`): a dead network mount
// blocks in the kernel, and such a thread is left behind rather than waited
// for.
CheckResult check_path(const HealthPath& p, std::chrono::milliseconds timeout, const CheckStop* stop = nullptr);

// Every RDMA port under <sysfs>/class/infiniband/<device>/ports/<n>/ is
// ACTIVE, save those an admin disabled (phys_state Disabled). nullopt when
// the host has none: nothing to check.
std::optional<CheckResult> check_rdma_ports(const std::string& sysfs = "/sys");

// "12.5 GiB", for the lines above.
std::string byte_text(unsigned long long bytes);

// `text` with every control character but tab (ESC included) and DEL
// written as "\xNN": what a check printed, safe to show in a log line.
std::string printable(const std::string& text);

}  // namespace cxxrun::agent
