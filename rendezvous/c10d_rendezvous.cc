#include "rendezvous/c10d_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "rendezvous/group_ranks.h"
#include "rendezvous/round_completion.h"
#include "rendezvous/round_records.h"

namespace cxxrun::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// A liveness snapshot longer than this is written once, under the round's
// alive_snapshot key, and each assignment carries kSnapshotElsewhere.
constexpr size_t kInlineSnapshot = 256;
// Group rank 0's assignment carries every member's address up to this many
// bytes: etcd refuses a request over 1.5 MiB (--max-request-bytes), and the
// record goes in a transaction with 127 others.
constexpr size_t kInlineAddrs = 512 * 1024;
constexpr const char* kSnapshotElsewhere = "@";

}  // namespace

C10dRendezvous::C10dRendezvous(store::StoreClient& store, RendezvousSettings settings, PickPort pick_port, Log log)
    : store_(store),
      keys_(settings.run_id),
      outcome_(store, keys_),
      lease_(settings.keep_alive_interval, [this](const std::string& line) { progress(line); }),
      s_(std::move(settings)),
      pick_port_(std::move(pick_port)),
      log_(std::move(log)),
      spares_(store, keys_, s_, log_, [this](const std::string& line) { progress(line); }) {
  store_.expect_waits_under(milestone_prefix());
}

std::string C10dRendezvous::milestone_prefix() const { return keys_.milestone_prefix(); }

std::string C10dRendezvous::event_prefix() const { return keys_.event_prefix(); }

std::string C10dRendezvous::config_text() const { return describe(config_of(s_)); }

void C10dRendezvous::check_config(std::optional<std::string> answer) {
  rendezvous::check_config(answer ? std::move(*answer) : store_.compare_set(keys_.key("config"), "", config_text()), s_);
}

Assignment C10dRendezvous::next_rendezvous() { return join(0, -1); }

Assignment C10dRendezvous::next_rendezvous(int expected, int stepped_out_now) {
  return join(expected, stepped_out_now);
}

Assignment C10dRendezvous::join(int expected, int stepped_out_now) {
  lease_.beat_if_due();
  const auto deadline = Clock::now() + s_.join_timeout;
  expected_ = expected;
  out_now_ = stepped_out_now;
  // After start_next_round, the config's answer came with its own, and its
  // round number is the one this COMPARE_SET would read (a round opened
  // since is found by the join, as one opened after this read always was).
  check_config(std::exchange(config_answer_, std::nullopt));
  int round = std::exchange(opened_, -1);
  if (round <= round_) round = to_int(store_.compare_set(keys_.key("round"), "", "0"), "round number");
  round = std::max(round, round_ + 1);
  Assignment out;
  while (!join_round(round, deadline, out)) ++round;
  return out;
}

Member C10dRendezvous::me() const {
  return Member{s_.local_addr.empty() ? store_.local_address() : s_.local_addr, hostname(),
                static_cast<long>(getpid()), s_.local_world_size, s_.node_order.value_or(kNoOrder), s_.node_group};
}

store::StoreClient::Join C10dRendezvous::join_of(int round) {
  me_ = me();
  store::StoreClient::Join join;
  join.counter = keys_.round(round, "count");
  join.record_prefix = keys_.round(round, "node/");
  join.record = describe(me_);
  // Its alive key rides on the join's write (MemberLiveness::joining).
  if (liveness_ && liveness_->joining(keys_.round(round, "alive/"), join)) lease_.renewed();
  return join;
}

bool C10dRendezvous::join_round(int round, Clock::time_point deadline, Assignment& out,
                                std::optional<store::StoreClient::Joined> taken) {
  lease_.beat_if_due();
  if (!taken) {
    store::StoreClient::Join join = join_of(round);
    // Opened with this join where start_next_round found it not yet opened.
    const auto open = std::exchange(open_with_join_, std::nullopt);
    if (open && open->desired == std::to_string(round)) join.open = open;
    taken = store_.join(join);
  }
  const int slot = static_cast<int>(*taken->added.count) - 1;
  if (liveness_) liveness_->took(keys_.round(round, "alive/") + taken->name);
  // Every milestone of the round follows its first joiner's ADD.
  store_.milestones_follow(keys_.milestone(round, ""), keys_.round(round, "count"));
  // The max-th joiner completes the round before anyone wakes, so the
  // others wake to a complete round instead of racing to complete it.
  // Below the (min-1)-th, no one waits for a joiner's wake key.
  std::optional<Completion> done;
  if (slot == s_.max_nodes - 1) done = complete_round(round, s_.max_nodes, slot);
  else if (slot + 1 >= s_.min_nodes) store_.set(keys_.milestone(round, "wake/" + std::to_string(slot)), "joined");
  log_("node " + me_.addr + " (pid " + std::to_string(me_.pid) + ") attempts to join round " +
       std::to_string(round) + " of rendezvous '" + s_.run_id + "' at " + s_.endpoint);
  if (!done) done = wait_for_completion(round, slot, deadline);
  if (slot >= done->members) {
    // The members' liveness is counted without this node's (SpareWait).
    if (liveness_) liveness_->spare();
    // Below max, the running members restart to take this node in.
    if (done->members < s_.max_nodes)
      store_.compare_set(keys_.event(round), "", std::string(to_string(RoundEvent::join)));
    spares_.wait_for_next_round(round, done->members);
    spares_.give_way(round, done->members);
    return false;
  }
  out = assign(round, *done, slot, deadline);
  return true;
}

// Waits, from milestone to milestone, until the round completes as
// RoundCompletion rules; whoever gets there first writes `complete` and
// everyone adopts that value.
C10dRendezvous::Completion C10dRendezvous::wait_for_completion(int round, int slot, Clock::time_point deadline) {
  const std::string complete = keys_.milestone(round, "complete");
  const int joined = slot + 1;
  RoundCompletion rule(s_, expected_, deadline);
  RoundSeen seen;
  // The first pass counts what this node's own ADD returned: the count only
  // grows, and a milestone passed since is found by the wait at once. It
  // reads `complete` only if the round may have completed before this node
  // joined: a completer counts at least min joiners, so the count was
  // above min by then.
  bool waited_out = false;  // the last wait ended at progress_interval, not at a milestone
  for (bool first = true;; first = false) {
    lease_.beat_if_due();
    if (!first || joined > s_.min_nodes)
      if (auto text = store_.get_if_set(complete)) return parse_completion(*text);
    // A job that ended while this node waited (its last member stopped,
    // too few nodes left) opens no round this node could complete: say so
    // now, not at join_timeout. A read per progress_interval of waiting,
    // none for a join that goes from milestone to milestone; so are the
    // nodes that declined a first round.
    if (waited_out && store_.get_if_set(keys_.key("config")) == std::optional<std::string>(kClosedConfig))
      throw RendezvousError("rendezvous '" + s_.run_id + "' at " + s_.endpoint +
                            " was closed while this node waited to join: the job ended without it");
    seen.count = first ? joined : static_cast<int>(store_.add(keys_.round(round, "count"), 0));
    if (seen.count < s_.max_nodes && expected_ == 0 && (waited_out || rule.reads_declines())) {
      auto declined = declined_nodes(round);
      for (size_t i = seen.declined.size(); i < declined.size(); ++i)
        log_("node " + declined[i] + "; it stepped out of rendezvous '" + s_.run_id +
             "' before joining, so that a spare can take its place");
      seen.declined = std::move(declined);
    }
    if (seen.count < s_.max_nodes && expected_ > 0)
      // Taken once: a node that became a spare and joins a later round reads afresh.
      seen.stepped_out = first && out_now_ >= 0 ? std::exchange(out_now_, -1) : stepped_out();
    const auto now = Clock::now();
    const RoundCompletion::Next next = rule.next(seen, now);
    if (!next.say.empty()) log_(next.say);
    if (next.members) return complete_round(round, *next.members, slot);
    // A lease (liveness_) must be renewed while this node waits, however
    // long the others take: the wait goes in slices of one keep-alive
    // interval, with a beat between them.
    waited_out = false;
    for (auto at = now;; at = Clock::now()) {
      const auto step = lease_.slice_end(at, next.until);
      const auto slice = std::max(milliseconds(1), duration_cast<milliseconds>(step - at));
      try {
        // Whoever makes the round full completes it: waiting for the max-th
        // joiner is waiting for `complete`, and brings the member count.
        if (next.milestone == s_.max_nodes) return parse_completion(store_.get(complete, slice));
        store_.wait({keys_.milestone(round, "wake/" + std::to_string(next.milestone - 1))}, slice);
        break;
      } catch (const store::StoreTimeout&) {
        waited_out = step >= next.until;
        if (waited_out) break;
        lease_.beat();
      }
    }
    progress("waiting for rendezvous job=" + s_.run_id + " at " + s_.endpoint + ": " + std::to_string(seen.count) +
             "/" + std::to_string(s_.min_nodes) + " nodes" +
             (s_.max_nodes > s_.min_nodes ? " (up to " + std::to_string(s_.max_nodes) + ")" : ""));
  }
}

C10dRendezvous::Completion C10dRendezvous::complete_round(int round, int count, int slot) {
  // A spare (slot >= count) may see the count reach max first; the last
  // member computes the assignments in its place.
  const std::string mine = describe(Completion{count, std::min(slot, count - 1)});
  // The waiters of the last wake key are woken with it, in one write.
  return parse_completion(store_.compare_set_and_set({keys_.milestone(round, "complete"), "", mine},
                                                     keys_.milestone(round, "wake/" + std::to_string(s_.max_nodes - 1)),
                                                     "complete"));
}

// Run by one elected member: one read of every descriptor, one write of
// every assignment.
void C10dRendezvous::publish_assignments(int round, int members) {
  const std::vector<std::string> texts = lease_.wait(Clock::now() + s_.read_timeout, [&](milliseconds t) {
    return store_.joiners(keys_.round(round, "count"), keys_.round(round, "node/"), members, t);
  });
  std::vector<Member> all;
  for (const auto& text : texts) all.push_back(parse_member(text));
  lease_.beat_if_due();
  const std::vector<int> order = rank_order(all);
  // Taken once here, so no member reads every member's liveness itself. A
  // short one (no member gone: a revision) goes in every assignment; a long
  // one is written once, ahead of them, and they point to it. Copied into
  // each of N assignments, a list of the members gone made the round's
  // writes N times its size (3,000 agents over etcd, most leases expired:
  // "request is too large").
  std::string alive =
      liveness_ ? liveness_->snapshot(keys_.round(round, "alive/"), keys_.round(round, "count"), members) : "";
  std::vector<std::string> assign_keys, values;
  if (alive.size() > kInlineSnapshot) {
    assign_keys.push_back(keys_.round(round, "alive_snapshot"));
    values.push_back(std::exchange(alive, kSnapshotElsewhere));
  }
  std::vector<AssignmentRecord> records = assignments(all, order, alive);
  // Group rank 0 serves the workers' store, which admits the members only:
  // their addresses ride in its assignment, so that it names the master
  // every member waits for without reading N descriptors again first.
  size_t bytes = 0;
  for (const Member& m : all) bytes += m.addr.size() + 1;
  if (!order.empty() && bytes <= kInlineAddrs)
    for (const Member& m : all) records[order.front()].member_addrs.push_back(m.addr);
  for (int slot = 0; slot < members; ++slot) {
    assign_keys.push_back(keys_.round(round, "assign/" + std::to_string(slot)));
    values.push_back(describe(records[slot]));
  }
  assign_keys.push_back(keys_.round(round, "ranks"));
  values.push_back(describe_ranks(order));
  // Last: it stands for every key before it (assign).
  assign_keys.push_back(keys_.milestone(round, "assigned"));
  values.push_back("1");
  store_.multi_set(assign_keys, values);
}

Assignment C10dRendezvous::assign(int round, Completion done, int slot, Clock::time_point deadline) {
  const std::string me = std::to_string(slot);
  const int members = done.members;
  if (done.assigner == slot) publish_assignments(round, members);
  auto get = [&](const std::string& key) {
    return lease_.wait(deadline, [&](milliseconds t) { return store_.get(key, t); });
  };
  // Every assignment is written before the round's `assigned` milestone:
  // a wait for it, then a read of this node's. Over etcd the milestone
  // comes on the watch every member holds, where a wait for the assignment
  // itself was a watch per member; a TCPStore answers in as many requests
  // (WAIT and a read, where a get was WAIT and GET).
  lease_.wait(deadline, [&](milliseconds t) { store_.wait({keys_.milestone(round, "assigned")}, t); });
  const auto text = store_.get_if_set(keys_.round(round, "assign/" + me));
  if (!text)
    throw RendezvousError("rendezvous '" + s_.run_id + "': round " + std::to_string(round) +
                          " was assigned, but not this node's slot " + me + " (were the job's keys removed?)");
  const AssignmentRecord mine = parse_assignment(*text);
  lease_.beat_if_due();
  Assignment out;
  out.round = round;
  out.group_world_size = members;
  out.group_rank = mine.group_rank;
  out.base_rank = mine.base_rank;
  out.world_size = mine.world_size;
  const std::string master = keys_.milestone(round, "master");
  std::string where;
  if (out.group_rank == 0) {
    const auto addrs = mine.member_addrs.empty() ? member_addrs(round, members) : mine.member_addrs;
    where = me_.addr + ":" + std::to_string(pick_port_(addrs));
    store_.set(master, where);
  } else {
    where = get(master);
  }
  const auto colon = where.rfind(':');
  out.master_addr = where.substr(0, colon);
  out.master_port = to_int(where.substr(colon + 1), "master port");
  round_ = round;
  slot_ = slot;
  members_ = members;
  outcome_.follow(round, members);
  rank_of_slot_.clear();
  counters_.joined(keys_.round(round, "alive/"), slot);
  if (liveness_) {
    std::string alive = mine.alive;
    if (alive == kSnapshotElsewhere) alive = get(keys_.round(round, "alive_snapshot"));
    liveness_->joined(keys_.round(round, "alive/"), keys_.round(round, "count"), members, alive);
  }
  log_("node " + me_.addr + " joined round " + std::to_string(round) + " of rendezvous '" + s_.run_id +
       "' as rank " + std::to_string(out.group_rank) + " in a world of size " + std::to_string(members) + " (" +
       std::to_string(out.world_size) + " workers, master " + where + ")");
  return out;
}

std::vector<std::string> C10dRendezvous::member_addrs(int round, int members) {
  std::vector<std::string> addrs;
  for (const auto& text : store_.joiners(keys_.round(round, "count"), keys_.round(round, "node/"), members,
                                         std::nullopt))
    addrs.push_back(parse_member(text).addr);
  return addrs;
}

const std::vector<int>& C10dRendezvous::rank_of_slot() {
  if (rank_of_slot_.empty()) {
    // Written before any member was assigned: gone only if the store lost
    // the job, and then a GET would wait out read_timeout for it. Read with
    // the keep-alives' client, as the liveness check it serves: its calls end
    // within a keep-alive interval, so a store gone away cannot hold the
    // agent (and its exit) for read_timeout.
    const auto written = beats_->get_if_set(keys_.round(round_, "ranks"));
    if (!written)
      throw store::StoreError("the rendezvous store at " + s_.endpoint + " no longer knows round " +
                              std::to_string(round_) + " of this job: it was restarted and its state is gone");
    rank_of_slot_ = parse_ranks(*written, members_);
  }
  return rank_of_slot_;
}

void C10dRendezvous::progress(const std::string& what) {
  const auto now = Clock::now();
  if (now - last_progress_ < s_.progress_interval) return;
  last_progress_ = now;
  log_(what);
}

// A store that forgot the job (restarted empty on the same port: its host
// died, and a restarted node hosts a new one) would take beats forever while
// the keys the round wrote never come; a failed beat makes it what it is, a
// lost store.
void C10dRendezvous::keep_alive() {
  if (liveness_) {
    liveness_->beat();
    return lease_.renewed();
  }
  if (round_ < 0) return;
  counters_.beat(*beats_, "the rendezvous store at " + s_.endpoint +
                              " no longer knows this job: it was restarted and its state is gone");
}

// Group rank 0 watches every member; every other member watches only rank 0,
// so a round of N nodes costs O(N) reads per check, not O(N^2), and any
// single death is seen by someone.
std::vector<int> C10dRendezvous::dead_members() {
  std::vector<int> dead;
  const auto now = Clock::now();
  // Checks run every interval/4; a beat observed up to that late still
  // leaves the verdict within interval * max_attempt of the last real beat.
  const auto limit = s_.keep_alive_interval * s_.keep_alive_max_attempt - s_.keep_alive_interval / 4;
  const auto& ranks = rank_of_slot();
  if (liveness_) {
    for (int slot : liveness_->dead_slots())
      if (slot != slot_ && slot < members_) dead.push_back(ranks.at(slot));
    return dead;
  }
  const bool leader = ranks.at(slot_) == 0;
  for (int i = 0; i < members_; ++i) {
    if (i == slot_ || (!leader && ranks.at(i) != 0)) continue;
    if (counters_.still_for(*beats_, i, now) > limit) dead.push_back(ranks.at(i));
  }
  return dead;
}

int C10dRendezvous::num_nodes_waiting() {
  if (round_ < 0) return 0;
  const int count = static_cast<int>(store_.add(keys_.round(round_, "count"), 0));
  return std::max(0, count - members_);
}

void C10dRendezvous::step_out() { store_.add(keys_.round(round_, "out"), 1); }

std::optional<Assignment> C10dRendezvous::rejoin_if_unchanged(int expected) {
  if (round_ < 0) return std::nullopt;
  lease_.beat_if_due();
  const auto deadline = Clock::now() + s_.join_timeout;
  const int next = round_ + 1;
  // The round opened by whoever comes first, as start_next_round does
  // with the join's ADD.
  const store::StoreClient::CompareSet open{keys_.key("round"), std::to_string(round_), std::to_string(next)};
  const store::StoreClient::Unchanged unchanged{keys_.round(round_, "count"),
                                                members_,
                                                {{keys_.round(round_, "out"), std::nullopt},
                                                 {keys_.key("config"), config_text()}},
                                                {keys_.key("round")}};
  store::StoreClient::Join join = join_of(next);
  join.open = open;
  join.unchanged = unchanged;
  auto got = store_.join(join);
  if (!got.added.count) {
    // Read as waiting_and_stepped_out reads: out, config, round.
    checked_round_ = round_;
    checked_ = std::move(got.added.read);
    return std::nullopt;
  }
  log_(reforming_line(std::min(expected, s_.max_nodes)));
  expected_ = expected;
  out_now_ = 0;  // the check found none stepped out
  Assignment out;
  std::optional<store::StoreClient::Joined> taken = std::move(got);
  for (int round = next; !join_round(round, deadline, out, std::exchange(taken, std::nullopt)); ++round) {
  }
  return out;
}

std::string C10dRendezvous::reforming_line(int coming) {
  return "re-forming the job in a new rendezvous round (expecting " + std::to_string(coming) + " nodes)";
}

C10dRendezvous::Waiting C10dRendezvous::waiting_and_stepped_out() {
  if (round_ < 0) return {};
  auto read = std::exchange(checked_round_, -1) == round_
                  ? std::move(checked_)
                  : store_.add_and_get_if_set_each(
                        keys_.round(round_, "count"), 0,
                        {keys_.round(round_, "out"), keys_.key("config"), keys_.key("round")});
  opening_reads_ = OpeningReads{round_, read.values.at(2), read.values.at(1)};
  return {std::max(0, static_cast<int>(read.count) - members_),
          read.values[0] ? to_int(*read.values[0], "stepped-out count") : 0};
}

int C10dRendezvous::stepped_out() {
  if (round_ < 0) return 0;
  auto text = store_.get_if_set(keys_.round(round_, "out"));
  return text ? to_int(*text, "stepped-out count") : 0;
}

void C10dRendezvous::decline(const std::string& why) {
  check_config();
  const int round = to_int(store_.compare_set(keys_.key("round"), "", "0"), "round number");
  std::string line = hostname() + " (pid " + std::to_string(getpid()) + ") " + why;
  std::replace(line.begin(), line.end(), '\n', ' ');
  store_.append(keys_.round(round, "declined"), line + "\n");
}

std::vector<std::string> C10dRendezvous::declined_nodes(int round) {
  return parse_lines(store_.get_if_set(keys_.round(round, "declined")).value_or(""));
}

// One round trip: opening the round, waking spares where some wait, and the
// join's check of the job's config (which depends on neither answer) go
// together.
void C10dRendezvous::start_next_round(bool spares_wait) {
  lease_.beat_if_due();
  using CompareSet = store::StoreClient::CompareSet;
  const CompareSet round{keys_.key("round"), std::to_string(round_), std::to_string(round_ + 1)};
  const CompareSet config{keys_.key("config"), "", config_text()};
  const auto read = std::exchange(opening_reads_, std::nullopt);
  std::optional<std::string> opened, config_answer;
  if (read && read->round == round_) {
    // Every member says the same; none writes now. Over etcd a COMPARE_SET
    // of each of N nodes is N requests, and every one that read the round
    // not yet opened (most, as they all wake at once) wrote a transaction
    // through Raft. A node that found it so opens it with its join's ADD,
    // in the same request, and the first such ADD opens it.
    opened = store::compare_set_without_write(read->round_number, round.expected);
    if (!opened) {
      opened = round.desired;
      open_with_join_ = round;
    }
    config_answer = store::compare_set_without_write(read->config, config.expected);
  }
  std::vector<CompareSet> batch;
  if (!opened) batch.push_back(round);
  if (spares_wait) batch.push_back({keys_.milestone(round_, "next"), "", std::to_string(round_ + 1)});
  if (!config_answer) batch.push_back(config);
  if (!batch.empty()) {
    std::vector<std::string> answers = store_.compare_sets(batch);
    if (!opened) opened = std::move(answers.front());
    if (!config_answer) config_answer = std::move(answers.back());
  }
  opened_ = to_int(*opened, "round number");
  config_answer_ = std::move(config_answer);
}

void C10dRendezvous::close(bool succeeded) {
  store_.set(keys_.key("config"), kClosedConfig);
  if (round_ >= 0) store_.set(keys_.milestone(round_, "next"), succeeded ? "closed" : "failed");
}

}  // namespace cxxrun::rendezvous
