#include "rendezvous/spare_wait.h"

#include <algorithm>
#include <map>
#include <thread>

#include "rendezvous/round_records.h"

namespace cxxrun::rendezvous {

SpareWait::SpareWait(store::StoreClient& store, const JobKeys& keys, const RendezvousSettings& settings,
                     MemberLiveness* liveness, Log log, Log progress)
    : store_(store),
      keys_(keys),
      s_(settings),
      liveness_(liveness),
      log_(std::move(log)),
      progress_(std::move(progress)) {}

// A spare (the round is full) or a late joiner waits, without a deadline as
// torchrun's spares do, until the next round opens or the job closes. A
// round whose members are all gone (its job was killed, and is launched
// again under the same id) opens no next round by itself: the waiter opens
// it, as torch's rendezvous moves on when no participant is left.
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
      if (const auto now = store_.get_if_set(keys_.job("round")); now && to_int(*now, "round number") > round) return;
      if (all_members_gone(round, members, seen)) {
        log_("no member of round " + std::to_string(round) + " of rendezvous '" + s_.run_id +
             "' is alive (was its job killed?); opening round " + std::to_string(round + 1));
        return open_round_after(round);
      }
      progress_("waiting as a spare for the next round of rendezvous '" + s_.run_id + "'");
    }
  }
}

// The next round is open and this node was not a member of the last: the
// members that go on join first, then a spare of the job's group (the most
// common among the last round's members), then the others, so that when
// several spares wait the nearest one takes a free place. Joining order is
// the whole mechanism: a round takes its first max joiners.
void SpareWait::give_way(int round, int members) {
  std::map<std::string, int> groups;
  try {
    std::vector<std::string> keys;
    for (int i = 0; i < members; ++i) keys.push_back(keys_.round(round, "node/" + std::to_string(i)));
    for (const auto& text : store_.multi_get(keys))
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
  store_.compare_set(keys_.job("round"), std::to_string(round), std::to_string(round + 1));
  store_.set(keys_.milestone(round, "next"), std::to_string(round + 1));
}

}  // namespace cxxrun::rendezvous
