// The checks a node runs on itself before a round that need no GPU: a
// site's own command, paths that must be writable with free space, and the
// host's RDMA ports. Each is bounded and says its verdict in one line of the
// words an admin would search for. agent/node_health.h decides which run
// when; the GPU checks are in agent/gpu_health.h.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "agent/config.h"

namespace cxxrun::agent {

struct CheckResult {
  std::string name;  // "command", "path /scratch", "rdma", "gpu-answers", ... (agent/gpu_health.h)
  bool healthy = true;
  std::string detail;  // one line
  std::chrono::milliseconds took{0};
};

// --health-check: `/bin/sh -c command` in a process group of its own,
// SIGKILLed with it after `timeout`. Exit 0 is healthy; otherwise the
// detail is the first line it printed (stdout, else stderr) and its exit
// status. Its status comes back through a pipe, not waitpid, so an agent
// loop reaping every child (a subreaper) cannot take it first.
CheckResult check_command(const std::string& command, std::chrono::milliseconds timeout);

// --health-path: a file can be created, written and removed in `p.path`,
// and its file system has at least p.min_free bytes free. On a thread of
// its own, given up after `timeout`: a dead network mount blocks in the
// kernel, and such a thread is left behind rather than waited for.
CheckResult check_path(const HealthPath& p, std::chrono::milliseconds timeout);

// Every RDMA port under <sysfs>/class/infiniband/<device>/ports/<n>/ is
// ACTIVE, save those an admin disabled (phys_state Disabled). nullopt when
// the host has none: nothing to check.
std::optional<CheckResult> check_rdma_ports(const std::string& sysfs = "/sys");

// "12.5 GiB", for the lines above.
std::string byte_text(unsigned long long bytes);

}  // namespace cxxrun::agent
