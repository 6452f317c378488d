// How a round's group ranks are chosen, by the one member that assigns them
// (C10dRendezvous::publish_assignments): pure, so every assigner of every
// round orders the same members the same way.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/member.h"
#include "rendezvous/round_records.h"

namespace cxxrun::rendezvous {

// The members' slots in group-rank order: `order` first (a scheduler's node
// id, --node-order; kNoOrder when none), then address, host, pid and slot,
// so that the order is total.
std::vector<int> rank_order(const std::vector<Member>& members);

// Each slot's assignment for `order` (rank_order's): its group rank, its
// first global rank (the nproc of every member ranked before it), the world
// size, and `alive`, the liveness snapshot every member gets.
std::vector<AssignmentRecord> assignments(const std::vector<Member>& members, const std::vector<int>& order,
                                          const std::string& alive);

}  // namespace cxxrun::rendezvous
