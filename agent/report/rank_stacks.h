// What `cxxrunctl stacks` reads of this node's ranks: each running rank's
// stack taken now (agent/hang/rank_stack.h), where it waits (the hang
// verdict's words, agent/hang/culprit.h) and the stack's text, in one line
// of JSON at most `limit` bytes (docs/cxxrunctl.md, "stacks"). The place is
// found in the whole stack before anything is cut, so a cut answer still
// groups right.
//
// The bound is shared: stacks that need less than an equal share leave the
// rest to the longer ones. A stack longer than its share keeps whole lines
// from the main thread's end (faulthandler lists the main thread last,
// eu-stack first) and says how many bytes it lost; ranks whose bare entries
// alone would pass the bound are dropped, highest first, and named.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/hang/rank_stack.h"

namespace cxxrun::agent {

struct StacksRequest {
  int rank = -1;  // < 0: every rank
};
// nullopt: not a stacks request.
std::optional<StacksRequest> parse_stacks_request(const std::string& json_text);

std::string stacks_answer(const StacksRequest& request, const std::vector<RankStack>& stacks, const std::string& node,
                          const std::string& host, size_t limit);

}  // namespace cxxrun::agent
