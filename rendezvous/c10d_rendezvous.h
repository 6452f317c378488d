// The c10d-style rendezvous: agents of one job meet through a store, agree on
// who is in this round and in which order, and learn where rank 0's workers
// host their store (MASTER_ADDR/MASTER_PORT).
//
// State lives in small per-key records updated with atomic ADD and
// COMPARE_SET, never in one blob. A node joining costs O(1) store operations
// and one store WAIT per phase (for the min-th joiner, then for the max-th
// joiner or the end of the last call), never a sleep loop; one elected node
// reads every descriptor once and writes each node its assignment, so a
// round of N nodes costs O(N) operations in all. Keys, under
// "cxxrun/rdzv/<run_id>/":
//   config             "<min>:<max>|<entrypoint>", first writer wins;
//                      "closed" once the job is over
//   round              the open round number
//   r<k>/count         ADD counter: a joiner's slot is the value it gets back
//   r<k>/node/<slot>   the joiner's descriptor "addr|host|pid|nproc|order"
//                      (StoreClient::join; over etcd it is the value of
//                      the join's marker, r<k>/count/adds/<name>, and
//                      joiners() reads them back in slot order)
//   r<k>/assign/<slot> "group_rank|base_rank|world_size|liveness snapshot"
//   r<k>/ranks         slots in group-rank order, comma-separated
//   r<k>/alive/<slot>  keep-alive counter (over etcd: r<k>/alive/<name>,
//                      on the node's lease, written with its join)
//   r<k>/dead          how many members the `dead` event found dead
//   r<k>/out           ADD counter of members that will not join round k+1
//                      (a failed health check between rounds)
//   r<k>/declined      a line ("host (pid) why") per node that declined
//                      the round before joining it (APPEND)
//   r<k>/failures      the failure records of every node that had one, a
//                      line each (APPEND), in the order they arrived
//   r<k>/finished      ADD counter of members whose workers succeeded
//   r<k>/stopped       ADD counter of members whose workers stopped after a
//                      failure
// and the round's milestones, which every member waits for, each written
// once (`next` at most twice), under "m/" (StoreClient::expect_waits_under:
// over etcd one watch serves them all, not a watch per wait; nothing that
// is written once per member goes here, or every member would receive it):
//   m/r<k>/wake/<slot> written by joiner <slot> >= min-1, the only ones a
//                      node waits for; wake/<max-1> also by the node that
//                      completes the round
//   m/r<k>/complete    "<n>|<slot>": the round has n members (slots >= n
//                      wait for a later round), and the completer, at
//                      <slot>, computes the assignments; first writer wins
//   m/r<k>/assigned    written by the assigner after every assign/<slot>
//                      and ranks, in the same MULTI_SET
//   m/r<k>/master      "addr:port" chosen by group rank 0
//   m/r<k>/next        "<k+1>" when the next round opens (by a member that
//                      read a node waiting, or by a waiter that found every
//                      member gone; a waiter also finds `round` moved at the
//                      end of each wait slice), "closed"
//                      when the job succeeded, "failed" when it failed:
//                      what a spare still waiting exits with
//   m/r<k>/all_stopped set by the last member whose workers stopped
// and outside them, the round's event, which every member's round watcher
// waits for on a connection of its own (over etcd, a watch of these alone;
// under m/ each member's milestone watch was pushed it too, a second time):
//   event/r<k>         what ended round k for everyone, first writer wins:
//                      "abort" (a worker failed), "join" (a node is waiting
//                      to join), "dead" (a member stopped its keep-alives),
//                      "done" (every member's workers succeeded)
// Group ranks are the members sorted by (order, addr, host, pid): the same
// set of nodes always gets the same ranks, whatever order they joined in.
// `order` is RendezvousSettings::node_order where the launcher knows one
// (Slurm's SLURM_NODEID), so group rank 0 is on the node the scheduler
// lists first; nodes without one sort after those with one.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/beat_counters.h"
#include "rendezvous/lease_keeper.h"
#include "rendezvous/member.h"
#include "rendezvous/member_liveness.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/round_keys.h"
#include "rendezvous/round_outcome.h"
#include "rendezvous/round_records.h"
#include "rendezvous/spare_wait.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

class C10dRendezvous {
 public:
  using Log = std::function<void(const std::string&)>;
  // `store` must outlive this object. `pick_port` returns the port of the
  // workers' store on this node, given the addresses of the round's members
  // (used when this node becomes group rank 0).
  using PickPort = std::function<int(const std::vector<std::string>& member_addrs)>;
  C10dRendezvous(store::StoreClient& store, RendezvousSettings settings, PickPort pick_port, Log log);

  // Joins the open round (or the next one, when this node is late or a
  // spare) and blocks until it completes. Throws RendezvousError on
  // join_timeout, an id clash, disagreeing --nnodes or a closed job
  // (RendezvousClosed when the job closed while this node was a spare).
  Assignment next_rendezvous();
  // The same, but completes as soon as `expected` nodes (at least min) are
  // in, without the last call: re-forming a known group after a restart.
  // `expected` counts the last round's members alive and the waiting
  // spares, even beyond max; members that step out (step_out) before or
  // while this node waits are taken off it here. `stepped_out_now`, when
  // not negative, is what this node's stepped_out() just returned: the
  // join's first look takes it instead of reading the count again (a later
  // step-out is read at the end of the first wait slice, as one after the
  // first look always was).
  Assignment next_rendezvous(int expected, int stepped_out_now = -1);

  // Where the round's milestones live (StoreClient::expect_waits_under, as
  // this object tells its own connection), and apart from them where every
  // round's event lives: a connection of another thread that waits only for
  // events is told that, and its watch brings nothing else.
  std::string milestone_prefix() const;
  std::string event_prefix() const;
  int round() const { return round_; }
  // The current round's key prefix, for what keeps keys of its own in it
  // (rendezvous/speed_board.h).
  std::string round_prefix() const { return keys_.round(round_, ""); }
  // How the current round ends: its event, failure records, finished and
  // stopped members, and the restart history (rendezvous/round_outcome.h).
  RoundOutcome& outcome() { return outcome_; }
  int members() const { return members_; }
  // Keep-alives and dead_members() go through `beats` (a connection with a
  // short deadline, so a lost store is noticed within a beat) instead of the
  // main store. Must outlive this object.
  void use_for_keep_alives(store::StoreClient& beats) { beats_ = &beats; }
  // Liveness by `liveness` instead of beat counters. Must outlive this object.
  void use_liveness(MemberLiveness& liveness) {
    liveness_ = &liveness;
    lease_.use(liveness_);
    spares_.use_liveness(liveness_);
  }
  // One keep-alive beat for the current round.
  void keep_alive();
  // Group ranks of members whose keep-alive counter has not moved for about
  // keep_alive_interval * keep_alive_max_attempt, by this node's clock (a
  // counter, not a timestamp, so clock skew between nodes does not matter).
  // Call it every keep_alive_interval / 4. Group rank 0 watches everyone,
  // the others watch rank 0.
  std::vector<int> dead_members();
  // Nodes that joined the current round after it completed: late joiners
  // and spares beyond --nnodes' maximum alike, since either can fill a
  // dead member's place (docs/torchrun-compat.md §5, "a member dies while
  // a spare waits").
  int num_nodes_waiting();
  // Opens round+1 for everyone (a restart or a membership change). The
  // nodes waiting beyond the last round (spares, late joiners) are woken by
  // the round's `next` key, written only where `spares_wait` (the caller
  // read a node waiting, or could not read): a COMPARE_SET of N members
  // for none. One that came after every member's read finds the round
  // number moved at the end of its wait slice (keep_alive_interval).
  // The join that follows (next_rendezvous) checks the job's config by the
  // answer of a COMPARE_SET sent with these, in the same round trip. After
  // waiting_and_stepped_out (this round's), the COMPARE_SETs are answered
  // from what it read: a node that found the round not yet opened opens it
  // with the join's ADD (StoreClient::add_and_compare_set), in one request.
  void start_next_round(bool spares_wait = true);
  // num_nodes_waiting() and stepped_out() read together, in one round trip
  // where the store can: what a re-join reads before it opens the next round.
  // The round number and the config, which start_next_round compares, are
  // read in the same request, for it.
  struct Waiting {
    int waiting = 0;
    int stepped_out = 0;
  };
  Waiting waiting_and_stepped_out();
  // The re-join of a member whose round changed only by deaths: no node
  // waits beyond it, none stepped out, and the job's config is this node's.
  // Then it joins the next round expecting `expected` nodes (as
  // start_next_round(false) and next_rendezvous(expected, 0) would), the
  // check riding on its ADD (StoreClient::add_if_unchanged: over etcd one
  // request where waiting_and_stepped_out's read and the ADD were two).
  // Otherwise it writes nothing and returns none, and
  // waiting_and_stepped_out() answers from what the check read, without a
  // request. A round opened beyond the next (this node slower than the
  // others' wait for it) is found as a late joiner finds one.
  std::optional<Assignment> rejoin_if_unchanged(int expected);
  // What a re-join says once it knows it goes on, and with how many nodes.
  static std::string reforming_line(int coming);
  // This node, a member of the current round, will not join the next one
  // (a failed health check). Nodes waiting for it in the next round count
  // it out at once: they complete without it, or throw RendezvousLost when
  // fewer than min are left.
  void step_out();
  // How many members of the current round stepped out.
  int stepped_out();
  // This node, which has not joined, will not (a failed health check, `why`
  // in one line): it is named, with `why`, to the nodes waiting for the open
  // round, which wait for a spare in its place at most last_call_timeout
  // once every place is taken or declined.
  void decline(const std::string& why);
  // The job is over: every later join fails, and a spare still waiting
  // exits 0 if the job `succeeded`, 1 if not (RendezvousClosed or
  // RendezvousError).
  void close(bool succeeded);

 private:
  using Clock = std::chrono::steady_clock;
  // `answer`: the config key's value as a COMPARE_SET of this node's
  // config just answered it (start_next_round's); none: asks.
  void check_config(std::optional<std::string> answer = std::nullopt);
  std::string config_text() const;
  // This node's descriptor now.
  Member me() const;
  // This node's join of `round`: its record, and what shows it alive.
  store::StoreClient::Join join_of(int round);
  // `taken`: this node's join, where it was made already.
  bool join_round(int round, Clock::time_point deadline, Assignment& out,
                  std::optional<store::StoreClient::Joined> taken = std::nullopt);
  // "host (pid N) why" of each node that declined `round`, in order.
  std::vector<std::string> declined_nodes(int round);
  Assignment join(int expected, int stepped_out_now);
  using Completion = RoundCompletionRecord;  // rendezvous/round_records.h
  Completion wait_for_completion(int round, int slot, Clock::time_point deadline);
  Completion complete_round(int round, int count, int slot);
  void publish_assignments(int round, int members);
  Assignment assign(int round, Completion done, int slot, Clock::time_point deadline);
  const std::vector<int>& rank_of_slot();
  // The members' addresses from their descriptors: for a round too large
  // for group rank 0's assignment to carry them (kInlineAddrs).
  std::vector<std::string> member_addrs(int round, int members);
  void progress(const std::string& what);

  store::StoreClient& store_;
  const RoundKeys keys_;
  RoundOutcome outcome_;
  store::StoreClient* beats_ = &store_;
  MemberLiveness* liveness_ = nullptr;
  LeaseKeeper lease_;
  RendezvousSettings s_;
  PickPort pick_port_;
  Log log_;
  SpareWait spares_;
  Member me_;
  int round_ = -1;
  int slot_ = -1;
  int members_ = 0;
  int expected_ = 0;
  // The round number start_next_round's COMPARE_SET answered: the join that
  // follows opens it without asking again (-1: none).
  int opened_ = -1;
  // What the config's COMPARE_SET sent with start_next_round's answered,
  // for that join's check_config.
  std::optional<std::string> config_answer_;
  // What waiting_and_stepped_out read of the keys start_next_round
  // compares, and in which round.
  struct OpeningReads {
    int round = -1;
    std::optional<std::string> round_number, config;
  };
  std::optional<OpeningReads> opening_reads_;
  // What rejoin_if_unchanged's failed check read, and in which round: the
  // read of waiting_and_stepped_out.
  int checked_round_ = -1;
  store::StoreClient::CountAndValues checked_;
  // The round's opening COMPARE_SET, where start_next_round found the
  // round not yet opened: sent with the join's ADD of that round.
  std::optional<store::StoreClient::CompareSet> open_with_join_;
  // next_rendezvous's stepped_out_now, for the join's first look.
  int out_now_ = -1;
  Clock::time_point last_progress_{};
  std::vector<int> rank_of_slot_;
  BeatCounters counters_;  // without a MemberLiveness
};

}  // namespace cxxrun::rendezvous
