#include "rendezvous/group_ranks.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace cxxrun::rendezvous {

std::vector<int> rank_order(const std::vector<Member>& all) {
  std::vector<int> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tie(all[a].order, all[a].addr, all[a].host, all[a].pid, a) <
           std::tie(all[b].order, all[b].addr, all[b].host, all[b].pid, b);
  });
  return order;
}

std::vector<AssignmentRecord> assignments(const std::vector<Member>& all, const std::vector<int>& order,
                                          const std::string& alive) {
  int world = 0;
  for (const Member& m : all) world += m.nproc;
  std::vector<AssignmentRecord> out(all.size());
  for (int rank = 0, base = 0; rank < static_cast<int>(order.size()); ++rank) {
    const int slot = order[rank];
    out[slot] = AssignmentRecord{rank, base, world, alive, {}};
    base += all[slot].nproc;
  }
  return out;
}

}  // namespace cxxrun::rendezvous
