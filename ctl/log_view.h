// What `cxxrunctl logs` makes of the agents' answers (agent/report/rank_output.h's
// JSON, docs/cxxrunctl.md "logs"): every rank's lines across nodes, merged
// by the time their agent read them, each with its rank in front, and where
// a follower goes on from. Pure: no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cxxrun::ctl {

struct LogBatch {
  std::string lines;             // "[rank3]: text\n" each, merged in time order
  std::map<int, long long> next;  // per rank: the offset to ask from next
  std::vector<std::string> notes;  // a rank's lost bytes, an answer not understood: one line each
};

// `answers`: node id -> its answer. Lines of ranks other than `rank` (when
// given, >= 0) are left out.
LogBatch merge_logs(const std::map<std::string, std::string>& answers, int rank);

}  // namespace cxxrun::ctl
