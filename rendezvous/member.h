// A member of a c10d rendezvous round as every node sees it: what a joiner
// writes about itself (its descriptor, rendezvous/round_records.h) and what
// the round's group ranks are computed from (rendezvous/group_ranks.h). The
// algorithm (rendezvous/c10d_rendezvous.h) and its pieces share it from here,
// below all of them.
#pragma once

#include <string>

namespace cxxrun::rendezvous {

struct Member {
  std::string addr;
  std::string host;
  long pid = 0;
  int nproc = 1;
  int order = 0;
  std::string group;  // --node-group ("" none)
};
// Member::order of a node whose settings have no node_order: it sorts after
// every node that has one.
inline constexpr int kNoOrder = 1 << 30;

}  // namespace cxxrun::rendezvous
