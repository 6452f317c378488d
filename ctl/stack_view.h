// What `cxxrunctl stacks` makes of the agents' answers (agent/report/rank_stacks.h's
// JSON, docs/cxxrunctl.md "stacks"): every rank's stack with its rank, pid,
// host and node, ascending by rank, then the line the hang verdict prints
// of where the ranks wait, grouped across every node that answered
// (common/stack_groups.h, the one home of that grouping). Pure: no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cxxrun::ctl {

struct StackReport {
  std::string text;                // each rank's header and stack, then the grouping line
  std::vector<int> ranks;          // the ranks shown, ascending
  std::vector<std::string> notes;  // cut stacks, dropped ranks, answers not understood: one line each
};

// `answers`: node id -> its answer. Ranks other than `rank` (when given,
// >= 0) are left out.
StackReport render_stacks(const std::map<std::string, std::string>& answers, int rank);

}  // namespace cxxrun::ctl
