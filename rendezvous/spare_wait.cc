#include "rendezvous/spare_wait.h"

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "rendezvous/member_liveness.h"
#include "rendezvous/round_records.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

void SpareWait::wait_for_next_round(int round, int members) {
  log_(members >= s_.max_nodes ? "rendezvous '" + s_.run_id + "' is full (" + std::to_string(s_.max_nodes) +
                                     " nodes); this node waits as a spare for the next round"
                               : "round " + std::to_string(round) + " of rendezvous '" + s_.run_id +
                                     "' completed without this node; waiting for the next round");
  const std::string next = keys_.milestone(round, "next");
  BeatCounters::Seen seen;
  for (;;) {
    try {
      const std::string value = store_.get(next, s_.keep_alive_interval);
      if (value == "closed")
        throw RendezvousClosed("rendezvous '" + s_.run_id + "' closed while this node waited as a spare");
      // A spare of a failed job failed with it: exit 0 would tell the
      // scheduler the job succeeded.
      if (value == "failed")
        throw RendezvousError("the job of rendezvous '" + s_.run_id +
                              "' failed while this node waited as a spare; the failure is in the other nodes' logs");
      return;
    } catch (const store::StoreTimeout&) {
      // Members that read no node waiting do not write `next`
      // (start_next_round): the round number says the next round is open.
      if (const auto now = store_.get_if_set(keys_.key("round")); now && to_int(*now, "round number") > round) return;
      if (all_members_gone(round, members, seen)) {
        log_("no member of round " + std::to_string(round) + " of rendezvous '" + s_.run_id +
             "' is alive (was its job killed?); opening round " + std::to_string(round + 1));
        return open_round_after(round);
      }
      progress_("waiting as a spare for the next round of rendezvous '" + s_.run_id + "'");
    }
  }
}

// Joining order is the whole mechanism: a round takes its first max
// joiners, so the nearest spare waits least.
void SpareWait::give_way(int round, int members) {
  std::map<std::string, int> groups;
  try {
    for (const auto& text :
         store_.joiners(keys_.round(round, "count"), keys_.round(round, "node/"), members, std::nullopt))
      if (const std::string g = parse_member(text).group; !g.empty()) ++groups[g];
  } catch (const std::exception&) {
    // Nothing known of the job's group: a spare like any other.
  }
  const auto job_group = std::max_element(groups.begin(), groups.end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool near = job_group == groups.end() || job_group->first == s_.node_group;
  std::this_thread::sleep_for(near ? kSpareGivesWay : kFarSpareGivesWay);
}

// Every member's keep-alive stopped: over etcd, no lease is left; over a
// TCPStore, no beat counter moved for interval * max_attempt, as this node
// saw them.
bool SpareWait::all_members_gone(int round, int members, BeatCounters::Seen& seen) {
  if (liveness_) return liveness_->count_alive(keys_.round(round, "alive/"), members) == 0;
  return BeatCounters::all_still(store_, keys_.round(round, "alive/"), members, seen,
                                 s_.keep_alive_interval * s_.keep_alive_max_attempt);
}

// A member still alive, wrongly thought gone, learns of the new round by the
// event, as of a node waiting to join.
void SpareWait::open_round_after(int round) {
  store_.compare_set(keys_.event(round), "", std::string(to_string(RoundEvent::join)));
  store_.compare_set(keys_.key("round"), std::to_string(round), std::to_string(round + 1));
  store_.set(keys_.milestone(round, "next"), std::to_string(round + 1));
}

}  // namespace cxxrun::rendezvous
