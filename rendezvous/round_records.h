// The c10d rendezvous's records as they are written in the store: a
// member's descriptor ("addr|host|pid|nproc|order|group"), a member's
// assignment, and the numbers its keys hold. Text from the store is another
// node's writing: anything malformed is a RendezvousError naming the text,
// never a crash.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/member.h"

namespace cxxrun::rendezvous {

std::string describe(const Member& m);
Member parse_member(const std::string& text);
// A member's place in a round, as the round's assigner writes it
// ("rank|base|world|alive", and group rank 0's "|addr,addr,..."): its group
// rank, its first global rank, the world size, the liveness snapshot
// (MemberLiveness::snapshot; "" when there is none; it may hold '|'-free
// text only), and for group rank 0 every member's address, which the
// workers' store it serves admits (rendezvous/worker_store.h): the
// assigner holds them all, where rank 0 read N descriptors again before it
// could name the master every member waits for.
struct AssignmentRecord {
  int group_rank = 0;
  int base_rank = 0;
  int world_size = 0;
  std::string alive;
  std::vector<std::string> member_addrs;  // in slot order; group rank 0's only
};
std::string describe(const AssignmentRecord& a);
AssignmentRecord parse_assignment(const std::string& text);

// The job's config record ("min:max|entrypoint"), written by its first
// node; every later one must write the same.
struct JobConfig {
  std::string nnodes;  // "min:max", as written
  std::string entrypoint;
};
std::string describe(const JobConfig& c);
JobConfig parse_config(const std::string& text);
// A written "min:max" as --nnodes says it: "4:4" is "4".
std::string shown_nnodes(const std::string& min_max);
// The config record of a job that is over.
inline constexpr const char* kClosedConfig = "closed";
struct RendezvousSettings;
// The config record of the job `s` joins.
JobConfig config_of(const RendezvousSettings& s);
// `theirs`, the config record the store holds, is that job's; or
// RendezvousError naming what differs (the job is closed, --nnodes
// disagrees, or another job uses the id).
void check_config(const std::string& theirs, const RendezvousSettings& s);

// A complete round ("<members>|<assigner>"): how many members it has
// (slots beyond wait for a later round), and the slot of the member that
// completed it, who computes everyone's assignment.
struct RoundCompletionRecord {
  int members = 0;
  int assigner = 0;
};
std::string describe(const RoundCompletionRecord& c);
RoundCompletionRecord parse_completion(const std::string& text);

// A round's group ranks in order, as the slot of each ("3,0,2,1": rank 0 is
// the member in slot 3), and read back as each slot's rank, for a round of
// `members`.
std::string describe_ranks(const std::vector<int>& slot_of_rank);
std::vector<int> parse_ranks(const std::string& text, int members);

// A list appended to one line at a time (a round's failure records, the
// nodes that declined it): its lines, empty ones left out.
std::vector<std::string> parse_lines(const std::string& text);

// `what` names the value in the error ("round number", "assignment").
int to_int(const std::string& text, const std::string& what);

}  // namespace cxxrun::rendezvous
