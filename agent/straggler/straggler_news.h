// What straggler detection tells the world (agent/straggler/straggler_watch.h
// to agent/report/reporter.h): a rank or node named or cleared (the
// cxxrun.agent.STRAGGLER event), and each window's view of this node's ranks
// (the /metrics gauges). Plain values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct StragglerNews {
  bool named = true;   // false: cleared, no longer slower than its peers
  bool node = false;   // a node of the job (judged by group rank 0), not a rank of this node
  int rank = -1;       // the rank's global rank; for a node, its first
  int ranks = 1;       // for a node, how many
  int group_rank = 0;  // the node's
  std::string host;
  std::string signal;  // "step", "compute", "gpu-clock"
  double ratio = 1;    // how much slower than the median peer
  std::string cause;   // the first cause's name ("cgroup-throttle", ...), "none"
  std::string line;    // what the log said
};

struct RankSpeed {
  int local_rank = 0;
  int rank = 0;
  double running_share = 0;  // the last window's share computing
  std::optional<double> step_seconds;
  bool straggler = false;    // named and not yet cleared
};

// This node's ranks in the last window, and whether the job names this node.
struct SpeedView {
  std::vector<RankSpeed> ranks;
  bool node_straggler = false;
};

}  // namespace cxxrun::agent
