// An event-driven load generator for the etcd rendezvous: N simulated agents
// from one thread and one epoll per process (bench/rdzv_sim.cc does the same
// for the c10d store), so that the generator is not the limit (rdzv_load
// --etcd runs a thread per agent with our real client, and on 2 cores the
// threads are what is measured).
//
// Each agent makes the etcd requests the product makes, in its order, with
// its keys: C10dRendezvous (rendezvous/c10d_rendezvous.cc) over EtcdStore
// (how each store primitive maps onto etcd: rendezvous/etcd_store.h) and
// EtcdJobStore/EtcdLiveness (a lease, the alive key, the watch on the
// round's alive keys), the milestones served from one watch per store
// (EtcdStore::expect_waits_under), the round events from the round
// watcher's own watch of them (C10dBackend::watch), over etcd's gRPC API as etcd/ speaks it:
// one kept-alive HTTP/2 connection per agent for unary calls, one per open
// watch (the liveness watch's kept from round to round, each round's watch
// a new stream on it: etcd::Watch::restart). The sequence is
// written once, below, one coroutine per step of the product (join,
// wait_for_completion, publish_assignments, assign, recover); if the
// product's sequence changes, these must follow. Checked against the real
// code by the members' request counts (bench/RESULTS.md, issue 45).
//
//   etcd_sim --etcd h1:p1,h2:p2,h3:p3 --nodes 1000 [--nproc 8] [--recover 1]
//            [--spread 1] [--keep-alive S] [--procs K] [--timeout S]
//
// --recover 1: then in-job recovery, as rdzv_load --recover 1 drives it
// through the real code: once every agent holds round 0, agent 0 publishes
// a failure record and the `abort` event; every agent, woken by its watch
// on the round's event, joins round 1 expecting N with the check that
// nothing else changed on its ADD, which opens the round
// (C10dBackend::rejoin, C10dRendezvous::rejoin_if_unchanged).
// --spread 1: agent i talks to member i mod M only (rdzv_load --spread 1), as
// the product's nodes each start at a member of their own (etcd_options).
// --keep-alive S: the agents' keep_alive_interval (1 s, the agent's
// default): each renews its lease every S while it waits, as LeaseKeeper
// and the agent do. --procs K: the agents over K processes (forked), for the
// descriptor limit: an agent holds up to four connections at once.
//
// Prints one line of JSON: the first round's wall time and, with
// --recover, the phases after the failure (abort push: to the last agent
// woken; re-join: to the last agent that learned round 1 complete; assign:
// to the last holding its assignment and master), the requests it sent per
// call (named by the gateway's path for it), the alive keys deleted under the agents' watches (lapses:
// leases that expired; with any, the figures are not of a healthy job) and
// the leases a beat found expired and granted again (regranted), and
// whether group ranks 0..N-1 came out exactly once with one master.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <sstream>

#include "args.h"
#include "etcd_sim_loop.h"
#include "etcd_sim_wire.h"
#include "procs.h"

using namespace etcd_sim;

namespace {

struct Options {
  std::vector<std::string> etcd;
  int nodes = 1000, nproc = 8, procs = 1;
  double timeout = 120, keep_alive = 1.0;
  bool recover = false, spread = false;
};

// What every process shares: counts, the last time each phase ended
// (steady-clock ns, one clock for all processes), each group rank's count.
struct Shared {
  std::atomic<int> done0{0}, done1{0}, woken{0}, complete1{0}, failures{0}, lapses{0}, regranted{0}, retries{0};
  std::atomic<int64_t> t_start{0}, t_done0{0}, t_failed{0}, t_woken{0}, t_complete1{0}, t_done1{0};
  // The assignment phase's parts, in the recovery's round: the assigner holding every descriptor, its
  // last assignment written, group rank 0's master written.
  std::atomic<int64_t> t_read1{0}, t_published1{0}, t_master1{0};
  std::atomic<int64_t> requests[8]{};
  std::atomic<uint64_t> master_hash{0};
  std::atomic<int> masters_differ{0};
  std::atomic<int>* ranks() { return reinterpret_cast<std::atomic<int>*>(this + 1); }
};

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
void at_least(std::atomic<int64_t>& v, int64_t t) {
  for (int64_t seen = v.load(); seen < t && !v.compare_exchange_weak(seen, t);) {
  }
}

// etcd's default --max-txn-ops: EtcdStore reads and writes many keys 128 a txn.
constexpr size_t kMaxTxnOps = 128;
constexpr int64_t kRangePage = 2048;  // EtcdStore's

// A key's range end for "every key under it" (etcd/wire's prefix rule).
std::string prefix_end(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff) p.pop_back();
  if (!p.empty()) ++p.back();
  return p;
}

// Per agent, what the product's objects hold between calls.
struct AgentState {
  std::string adder;  // EtcdStore::adder_
  int adds = 0;
  int64_t lease = 0;
  Clock::time_point last_beat;  // LeaseKeeper::last_
  std::unique_ptr<Conn> watch;  // EtcdStore::watch_, kept while waits are on one key
  std::string watched;
  std::unique_ptr<Conn> alive;  // EtcdLiveness::watch_
  std::unique_ptr<Conn> events;  // the round watcher's store's watch of the round events
  std::set<std::string> events_seen;  // the round events it read or was pushed
  // EtcdStore's milestones (StoreClient::expect_waits_under): one watch on
  // the job's m/ prefix for the store's life, what it or a group's read
  // brought, and the rounds whose group was read.
  std::unique_ptr<Conn> milestones;
  int64_t milestones_from = 0;  // the watch's start revision
  std::map<std::string, std::string> seen;
  std::set<std::string> read_groups;
  int64_t added_created = 0;  // the last add's counter's create revision
  Clock::time_point holds_until;  // EtcdLiveness::holds_until_
  bool open_with_join = false;    // C10dRendezvous::open_with_join_
  int check_from = -1;  // rejoin_if_unchanged's round: the next join's ADD carries its check
  int round = -1, slot = -1, members = 0, opened = -1;
  int rank = -1;
  std::string master;
};

class Sim : Loop {
 public:
  Sim(const Options& o, Shared& sh, std::string run, int first, int last)
      : Loop(o.etcd, sh.requests, sh.lapses, sh.retries), o_(o), sh_(sh), run_(std::move(run)),
        agents_(static_cast<size_t>(last - first)), st_(agents_.size()),
        interval_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.keep_alive))) {
    for (size_t k = 0; k < agents_.size(); ++k) {
      agents_[k].index = first + static_cast<int>(k);
      agents_[k].home = agents_[k].member = o.spread ? agents_[k].index % static_cast<int>(members_.size()) : 0;
      st_[k].adder = std::to_string(getpid()) + "-" + std::to_string(agents_[k].index);
      st_[k].last_beat = Clock::now();
    }
  }

  // Runs this process's agents to the end; their failures are counted in sh_.
  void run() {
    std::vector<Task<>> tasks;
    for (auto& a : agents_) tasks.push_back(agent(a));
    for (auto& t : tasks) t.start();
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout));
    while (finished_ < agents_.size() && sh_.failures == 0 && Clock::now() < deadline) {
      poll(5);  // the barriers are polled in shared memory
      // The barrier: every agent of every process holds round 0.
      if (barrier_open_ == false && sh_.done0.load() >= o_.nodes) {
        barrier_open_ = true;
        for (auto& a : agents_)
          if (a.waiter && a.waiting_on == nullptr && in_barrier_.count(a.index)) resume(a);
      }
      bury();
    }
    if (finished_ < agents_.size() && sh_.failures == 0) {
      fprintf(stderr, "etcd_sim: %zu agents not done within --timeout\n", agents_.size() - finished_);
      ++sh_.failures;
    }
    for (auto& a : agents_) close_conn(a.unary);
    for (auto& s : st_) close_conn(s.watch), close_conn(s.alive), close_conn(s.events);
    bury();
  }

 private:
  // ---- keys and values, as C10dRendezvous writes them ---------------------
  std::string job(const std::string& suffix) const { return "/torchelastic/p2p/cxxrun/rdzv/" + run_ + "/" + suffix; }
  std::string rk(int round, const std::string& suffix) const { return job("r" + std::to_string(round) + "/" + suffix); }
  // A round's milestones (rendezvous/c10d_rendezvous.h): m/r<k>/...
  std::string mk(int round, const std::string& suffix) const { return job("m/r" + std::to_string(round) + "/" + suffix); }
  // The round's event: apart from its milestones (event/r<k>, rendezvous/c10d_rendezvous.h).
  std::string event_key(int round) const { return job("event/r" + std::to_string(round)); }
  std::string config() const { return std::to_string(o_.nodes) + ":" + std::to_string(o_.nodes) + "|etcd_sim"; }
  std::string addr(int i) const { return "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1); }
  std::string describe(int i) const { return addr(i) + "|sim|" + std::to_string(i) + "|" + std::to_string(o_.nproc) + "|1073741824|"; }
  std::string alive_key(int round, int slot) const {
    char digits[16];
    snprintf(digits, sizeof digits, "%010d", slot);
    return rk(round, "alive/") + digits;
  }
  AgentState& st(Agent& a) { return st_[&a - agents_.data()]; }

  // ---- the sequence: C10dRendezvous and rdzv_load's recover() -------------

  // One agent, start to end; a failure is counted and ends this process's run.
  Task<> agent(Agent& a) {
    try {
      co_await steps(a);
    } catch (const std::exception& e) {
      if (sh_.failures++ == 0) fprintf(stderr, "etcd_sim: agent %d: %s\n", a.index, e.what());
    }
    ++finished_;
  }

  Task<> steps(Agent& a) {
    co_await call(a, "/v3/kv/range", body::keyed(job("config")));  // EtcdJobStore::reach
    co_await join(a, 0);
    at_least(sh_.t_done0, now_ns());
    // In the barrier once its round watcher watches too: the product's
    // workers run for a while before any fails.
    co_await watch_events(a);
    ++sh_.done0;
    if (o_.recover) {
      co_await barrier(a);
      co_await recover(a);
      at_least(sh_.t_done1, now_ns());
    }
    AgentState& s = st(a);
    if (s.rank >= 0 && s.rank < o_.nodes) ++sh_.ranks()[s.rank];
    const uint64_t h = std::hash<std::string>()(s.master);
    uint64_t zero = 0;
    if (!sh_.master_hash.compare_exchange_strong(zero, h) && zero != h) ++sh_.masters_differ;
    // Not timed: EtcdJobStore::leave(true) once every agent here is done,
    // as rdzv_load's agents leave; the last deletes the job's keys. Those
    // done first wait without a timer: no CPU taken from etcd meanwhile.
    leaving_.push_back(&a);
    if (leaving_.size() == agents_.size()) {
      for (Agent* other : leaving_)
        if (other != &a && other->waiter) resume(*other);
    } else {
      co_await park(a, nullptr, Clock::time_point::max());
    }
    close_conn(s.alive);
    if (co_await add(a, job("left")) >= o_.nodes)
      co_await call(a, "/v3/kv/deleterange", body::prefix(job(""), prefix_end(job(""))));
    close_conn(s.watch);
    close_conn(s.milestones);
    close_conn(s.events);
  }

  // rdzv_load's recover(): the failure, the event, C10dBackend::rejoin.
  Task<> recover(Agent& a) {
    AgentState& s = st(a);
    if (a.index == 0) {
      sh_.t_failed = now_ns();
      co_await append(a, rk(s.round, "failures"), "{\"rank\": 0, \"exitcode\": 1}\n");  // publish_failure
      co_await compare_set(a, event_key(s.round), "", "abort");                      // publish_event(abort)
    }
    co_await round_event(a, s.round);
    ++sh_.woken;
    at_least(sh_.t_woken, now_ns());
    // C10dBackend::rejoin, nothing changed but the failure: rejoin_if_unchanged joins round+1 with
    // the check on its ADD (add_if_unchanged: the round's count still N, none stepped out, the
    // config this job's), which opens the round as add_and_compare_set does. The sim makes no
    // spare and no step-out: a check that fails is an error here, not the product's slower path.
    s.check_from = s.round;
    s.opened = s.round + 1;
    s.open_with_join = true;
    co_await join(a, o_.nodes, /*config_known=*/true);
  }

  // C10dRendezvous::join and join_round, for a round of min = max = N.
  Task<> join(Agent& a, int expected, bool config_known = false) {
    AgentState& s = st(a);
    const int n = o_.nodes;
    co_await beat_if_due(a);
    if (!config_known) co_await compare_set(a, job("config"), "", config());  // check_config
    int round = std::exchange(s.opened, -1);
    if (round <= s.round) round = std::stoi(co_await compare_set(a, job("round"), "", "0"));
    round = std::max(round, s.round + 1);
    co_await beat_if_due(a);
    const bool open = std::exchange(s.open_with_join, false);
    const int slot = static_cast<int>(co_await add(a, rk(round, "count"), open ? round : -1, std::exchange(s.check_from, -1))) - 1;
    // milestones_follow: a count first added to after the watch began: the round's group is not read.
    if (s.milestones && s.added_created >= s.milestones_from) s.read_groups.insert(mk(round, ""));
    // EtcdLiveness::joining: the last round's watch stopped (its connection kept for the next), the
    // lease renewed (or granted) unless its last renewal holds for an interval and a half yet, the
    // alive key and the descriptor in one txn.
    if (s.alive) stop_watch(*s.alive);
    if (s.lease == 0 || s.holds_until - Clock::now() <= interval_ * 3 / 2) {
      if (s.lease == 0 || co_await keep_alive(a) == 0) co_await grant(a);
      s.last_beat = Clock::now();
    }
    co_await call(a, "/v3/kv/txn", body::joining(alive_key(round, slot), s.lease, rk(round, "node/" + std::to_string(slot)),
                                                 describe(a.index)));
    std::string done;
    if (slot == n - 1) {  // complete_round: compare_set_and_set, one txn for the milestone and the wake key
      const std::string mine = std::to_string(n) + "|" + std::to_string(slot);
      const json r = co_await call(a, "/v3/kv/txn", body::compare_set_and_set(mk(round, "complete"), mine,
                                                                               mk(round, "wake/" + std::to_string(n - 1)), "complete"));
      done = r.value("succeeded", false) ? mine : unb64(r.at("responses").at(0).at("response_range").at("kvs").at(0).value("value", ""));
    } else {
      // wait_for_completion: the first pass knows the count from the ADD and
      // (expected > 0) who stepped out from the re-join; the milestone is max.
      (void)expected;
      co_await beat_if_due(a);
      done = *co_await milestone(a, mk(round, "complete"), true, true);
    }
    if (round == 1) {
      ++sh_.complete1;
      at_least(sh_.t_complete1, now_ns());
    }
    const int members = std::stoi(done.substr(0, done.find('|')));
    const int assigner = std::stoi(done.substr(done.find('|') + 1));
    co_await assign(a, round, members, assigner, slot);
  }

  // C10dRendezvous::assign (and publish_assignments for the assigner).
  Task<> assign(Agent& a, int round, int members, int assigner, int slot) {
    AgentState& s = st(a);
    // Every node's descriptor key: only the assigner and group rank 0 read
    // them. Built by every agent, they were N² strings in one process, held
    // across the waits: the generator's CPU and memory, not etcd's, grew
    // with N² (5 GB a process at 10,000 agents).
    const auto nodes = [&] {
      std::vector<std::string> out;
      for (int i = 0; i < members; ++i) out.push_back(rk(round, "node/" + std::to_string(i)));
      return out;
    };
    if (assigner == slot) co_await publish_assignments(a, round, members, nodes());
    // The round's `assigned` milestone, then this node's assignment in one read (get_if_set).
    co_await milestone(a, mk(round, "assigned"), true, true);
    const json got = co_await call(a, "/v3/kv/range", body::keyed(rk(round, "assign/" + std::to_string(slot))));
    if (!got.contains("kvs") || got["kvs"].empty()) throw std::runtime_error("assigned, but no assignment");
    const std::string mine = unb64(got["kvs"][0].value("value", ""));
    co_await beat_if_due(a);
    std::vector<std::string> f;
    for (std::stringstream in(mine); std::getline(in, f.emplace_back(), '|');) {
    }
    s.rank = std::stoi(f.at(0));
    if (s.rank == 0) {
      // member_addrs, for the port picker, unless they came with the assignment
      if (std::count(mine.begin(), mine.end(), '|') < 4) co_await multi_get(a, nodes());
      s.master = addr(a.index) + ":29500";
      co_await call(a, "/v3/kv/put", body::put(mk(round, "master"), s.master));
      if (round > 0) sh_.t_master1 = now_ns();
    } else {
      s.master = *co_await milestone(a, mk(round, "master"), true, true);
    }
    s.round = round, s.slot = slot, s.members = members;
    // EtcdLiveness::joined: the snapshot's revision, a watch of the round's alive keys from after it.
    std::string alive = f.size() > 3 ? f[3] : "";
    if (alive == "@") alive = co_await get(a, rk(round, "alive_snapshot"), true);
    const std::string prefix = rk(round, "alive/");
    const json create = body::watch(prefix, prefix_end(prefix), std::stoll(alive.substr(0, alive.find(':'))) + 1);
    if (s.alive) restart_watch(*s.alive, create);
    else s.alive = open_watch(a, create);
    s.alive->liveness = true;
  }

  Task<> publish_assignments(Agent& a, int round, int members, const std::vector<std::string>& nodes) {
    // wait_and_get: the values with the read (and, for any still absent, the watch's events)
    std::vector<std::string> all = co_await wait_many(a, nodes);
    if (round > 0) sh_.t_read1 = now_ns();
    co_await beat_if_due(a);
    // EtcdLiveness::snapshot: a count of the alive keys; their names only if some are missing.
    const json counted = co_await call(a, "/v3/kv/range", body::span(alive_key(round, 0), alive_key(round, members), "count_only"));
    std::string alive = std::to_string(i64(counted.at("header"), "revision"));
    if (i64(counted, "count") < members) {
      const json present = co_await call(a, "/v3/kv/range", body::span(alive_key(round, 0), alive_key(round, members), "keys_only"));
      std::set<std::string> there;
      for (const auto& kv : present.value("kvs", json::array())) there.insert(unb64(kv.value("key", "")));
      alive = std::to_string(i64(present.at("header"), "revision"));
      for (int i = 0, first = 1; i < members; ++i)
        if (!there.count(alive_key(round, i))) alive += (first ? ":" : ",") + std::to_string(i), first = 0;
    }
    // rank_order: by address, then slot.
    std::vector<int> order(all.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return std::make_pair(all[x].substr(0, all[x].find('|')), x) < std::make_pair(all[y].substr(0, all[y].find('|')), y);
    });
    std::vector<std::string> keys, values;
    if (alive.size() > 256) keys.push_back(rk(round, "alive_snapshot")), values.push_back(std::exchange(alive, "@"));
    std::vector<int> rank_of(all.size());
    for (size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = static_cast<int>(r);
    std::vector<int> base(all.size());
    for (size_t r = 0, b = 0; r < order.size(); ++r) base[order[r]] = static_cast<int>(b), b += o_.nproc;
    std::string ranks;
    // Group rank 0's assignment carries every member's address (up to 512 KiB).
    std::string addrs;
    for (int i = 0; i < members; ++i) addrs += (i ? "," : "|") + all[i].substr(0, all[i].find('|'));
    if (addrs.size() > 512 * 1024) addrs.clear();
    for (int i = 0; i < members; ++i) {
      keys.push_back(rk(round, "assign/" + std::to_string(i)));
      values.push_back(std::to_string(rank_of[i]) + "|" + std::to_string(base[i]) + "|" +
                       std::to_string(members * o_.nproc) + "|" + alive + (rank_of[i] == 0 ? addrs : ""));
      ranks += (i ? "," : "") + std::to_string(order[i]);
    }
    keys.push_back(rk(round, "ranks"));
    values.push_back(ranks);
    keys.push_back(mk(round, "assigned"));  // last: it stands for every key before it
    values.push_back("1");
    for (size_t at = 0; at < keys.size(); at += kMaxTxnOps) {  // multi_set
      co_await call(a, "/v3/kv/txn", body::puts(keys, values, at, kMaxTxnOps));
    }
    if (round > 0) sh_.t_published1 = now_ns();
  }

  // rdzv_load's Round0Barrier: the agents renew their leases while they wait.
  Task<> barrier(Agent& a) {
    in_barrier_.insert(a.index);
    while (!barrier_open_) {
      co_await park(a, nullptr, Clock::now() + interval_);
      if (!barrier_open_) co_await beat(a);
    }
    in_barrier_.erase(a.index);
  }

  // ---- EtcdStore's primitives ---------------------------------------------

  // compare_set: a range; only if the key is as expected, a txn.
  Task<std::string> compare_set(Agent& a, const std::string& k, const std::string& expected, const std::string& desired) {
    const json got = co_await call(a, "/v3/kv/range", body::keyed(k));
    const json* kv = got.contains("kvs") && !got["kvs"].empty() ? &got["kvs"][0] : nullptr;
    if (kv && (expected.empty() || unb64(kv->value("value", "")) != expected)) co_return unb64(kv->value("value", ""));
    if (!kv && !expected.empty()) co_return expected;
    co_return co_await compare_set_txn(a, k, expected, desired);
  }
  // compare_set's write, for a key found as expected.
  Task<std::string> compare_set_txn(Agent& a, const std::string& k, const std::string& expected, const std::string& desired) {
    const json r = co_await call(a, "/v3/kv/txn", body::compare_set(k, expected, desired));
    if (r.value("succeeded", false)) co_return desired;
    const json responses = r.value("responses", json::array());
    const json kvs = responses.empty() ? json::array() : responses[0].value("response_range", json::object()).value("kvs", json::array());
    co_return kvs.empty() ? expected : unb64(kvs[0].value("value", ""));
  }

  // add(k, 1): a txn of [put k, range k, put marker] if the marker is absent; with `open` >= 0
  // (add_and_compare_set), the round's opening compare_set from open-1 to open nested inside; with
  // `check` >= 0 (add_if_unchanged), only while round `check`'s count is still its members, none of
  // them stepped out and the config is this job's, its keys and the round read where not.
  Task<int64_t> add(Agent& a, const std::string& k, int open = -1, int check = -1) {
    AgentState& s = st(a);
    const std::string marker = k + "/adds/" + s.adder + "-" + std::to_string(++s.adds);
    json request = body::add(k, marker);
    if (check >= 0) {
      for (json c : {body::version_is(rk(check, "count"), s.members, "EQUAL"), body::absent(rk(check, "out")),
                     body::value_is(job("config"), config())})
        request["compare"].push_back(std::move(c));
      for (const std::string& key : {rk(check, "count"), rk(check, "out"), job("config"), job("round")})
        request["failure"].push_back(body::op_range(key));
    }
    if (open >= 0)
      request["success"].push_back({{"request_txn", body::txn({body::value_is(job("round"), std::to_string(open - 1))},
                                                               {body::op_put(job("round"), std::to_string(open))}, {})}});
    const json r = co_await call(a, "/v3/kv/txn", request);
    if (r.value("succeeded", false)) {
      const json& kv = r.at("responses").at(1).at("response_range").at("kvs").at(0);
      s.added_created = i64(kv, "create_revision");
      co_return i64(kv, "version");
    }
    if (r.at("responses").at(0).at("response_range").value("kvs", json::array()).empty())
      throw std::runtime_error("the re-join's check failed: a spare or a step-out, which the sim never makes");
    // A resend of an add that had applied: the count as of its marker's revision.
    const int64_t applied = i64(r.at("responses").at(0).at("response_range").at("kvs").at(0), "create_revision");
    const json then = co_await call(a, "/v3/kv/range", body::at_revision(k, applied));
    s.added_created = i64(then.at("kvs").at(0), "create_revision");
    co_return i64(then.at("kvs").at(0), "version");
  }

  // append: a range, then a txn on its mod_revision (or its absence).
  Task<> append(Agent& a, const std::string& k, const std::string& value) {
    const json got = co_await call(a, "/v3/kv/range", body::keyed(k));
    const bool there = got.contains("kvs") && !got["kvs"].empty();
    const std::string next = (there ? unb64(got["kvs"][0].value("value", "")) : "") + value;
    co_await call(a, "/v3/kv/txn", body::append(k, next, there ? i64(got["kvs"][0], "mod_revision") : 0));
  }

  // EtcdStore::read_many: more keys than a txn holds, under a common prefix,
  // as pages of the prefix's range at the first page's revision; others 128
  // ranges a txn. The values (empty: absent) and the first revision.
  Task<std::pair<std::vector<std::optional<std::string>>, int64_t>> read_many(Agent& a, const std::vector<std::string>& keys) {
    std::vector<std::optional<std::string>> values(keys.size());
    int64_t revision = 0;
    const auto bounds = std::minmax_element(keys.begin(), keys.end());
    const std::string low = keys.empty() ? "" : *bounds.first, high = keys.empty() ? "" : *bounds.second;
    const size_t common = std::mismatch(low.begin(), low.end(), high.begin(), high.end()).first - low.begin();
    if (keys.size() > kMaxTxnOps && common > 0) {
      std::map<std::string, size_t> wanted;
      for (size_t i = 0; i < keys.size(); ++i) wanted.emplace(keys[i], i);
      const std::string prefix = low.substr(0, common), end = prefix_end(prefix);
      std::string from = prefix;
      for (bool more = true; more;) {
        const json r = co_await call(a, "/v3/kv/range", body::page(from, end, kRangePage, revision));
        if (revision == 0) revision = i64(r.at("header"), "revision");
        const json& kvs = r.value("kvs", json::array());
        for (const auto& kv : kvs)
          if (auto it = wanted.find(unb64(kv.value("key", ""))); it != wanted.end()) values[it->second] = unb64(kv.value("value", ""));
        more = r.value("more", false) && !kvs.empty();
        if (more) from = unb64(kvs.back().value("key", "")) + '\0';
      }
      co_return std::make_pair(std::move(values), revision);
    }
    values.clear();
    for (size_t at = 0; at < keys.size(); at += kMaxTxnOps) {
      const json r = co_await call(a, "/v3/kv/txn", body::ranges(keys, at, kMaxTxnOps));
      if (revision == 0) revision = i64(r.at("header"), "revision");
      for (const auto& one : r.value("responses", json::array())) {
        const json& kvs = one["response_range"].value("kvs", json::array());
        values.push_back(kvs.empty() ? std::nullopt : std::optional(unb64(kvs[0].value("value", ""))));
      }
    }
    co_return std::make_pair(std::move(values), revision);
  }

  Task<std::vector<std::string>> multi_get(Agent& a, const std::vector<std::string>& keys) {
    auto [values, revision] = co_await read_many(a, keys);
    std::vector<std::string> out;
    for (auto& v : values) out.push_back(v.value_or(""));
    co_return out;
  }

  // wait_and_get(keys): read them; one watch on the absent ones' common prefix; their values.
  Task<std::vector<std::string>> wait_many(Agent& a, const std::vector<std::string>& keys) {
    auto [values, revision] = co_await read_many(a, keys);
    std::map<std::string, size_t> waiting;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!values[i]) waiting.emplace(keys[i], i);
    auto done = [&] {
      std::vector<std::string> out;
      for (auto& v : values) out.push_back(v.value_or(""));
      return out;
    };
    if (waiting.empty()) co_return done();
    std::string prefix = waiting.begin()->first;
    for (const auto& [k, i] : waiting) prefix.resize(std::mismatch(prefix.begin(), prefix.end(), k.begin(), k.end()).first - prefix.begin());
    auto w = open_watch(a, body::watch(prefix, prefix_end(prefix), revision + 1));
    while (!waiting.empty()) {
      if (!co_await events(a, *w, Clock::now() + interval_)) {
        co_await beat(a);  // publish_assignments waits in LeaseKeeper's slices
        continue;
      }
      for (const json& e : take_events(*w))
        if (auto it = waiting.find(unb64(e["kv"].value("key", ""))); it != waiting.end() && e.value("type", "PUT") == "PUT") {
          values[it->second] = unb64(e["kv"].value("value", ""));
          waiting.erase(it);
        }
    }
    close_conn(w);
    co_return done();
  }

  // C10dBackend::watch, once the first round is joined: the round watcher's
  // store reads the events' group and watches it alone from the revision
  // after (rendezvous/etcd_milestones.h), on connections of its own; its
  // read goes over the agent's unary connection here, an idle connection
  // fewer on the member than the product holds.
  Task<> watch_events(Agent& a) {
    AgentState& s = st(a);
    const std::string all = job("event/");
    const json got = co_await call(a, "/v3/kv/range", body::prefix(all, prefix_end(all)));
    for (const json& kv : got.value("kvs", json::array())) s.events_seen.insert(unb64(kv.value("key", "")));
    s.events = open_watch(a, body::watch(all, prefix_end(all), i64(got.at("header"), "revision") + 1));
  }

  // RoundWatcher's get of the round's event, a keep-alive interval at a
  // time; the agent beats between (on its own thread in the product).
  Task<> round_event(Agent& a, int round) {
    AgentState& s = st(a);
    const std::string k = event_key(round);
    for (;;) {
      if (s.events_seen.count(k)) co_return;
      while (co_await events(a, *s.events, Clock::now() + interval_)) {
        for (const json& e : take_events(*s.events))
          if (e.value("type", "PUT") == "PUT") s.events_seen.insert(unb64(e["kv"].value("key", "")));
        if (s.events_seen.count(k)) co_return;
      }
      co_await beat(a);
    }
  }

  // EtcdStore::milestone_value: a milestone delivered (or read) costs no
  // request; one not yet known is read with its round's group (one range of
  // m/r<k>/), the watch on the whole m/ prefix opened at the first such read,
  // from the revision after it; then its put comes on that watch, waited for
  // in LeaseKeeper's slices. `wait` false: what is known now (get_if_set).
  Task<std::optional<std::string>> milestone(Agent& a, const std::string& k, bool wait, bool beat_between) {
    AgentState& s = st(a);
    const std::string all = job("m/");
    auto take = [&] {
      if (!s.milestones) return;
      for (const json& e : take_events(*s.milestones)) {
        const std::string key = unb64(e["kv"].value("key", ""));
        if (e.value("type", "PUT") == "PUT") s.seen[key] = unb64(e["kv"].value("value", ""));
        else s.seen.erase(key);
      }
    };
    take();
    if (auto it = s.seen.find(k); it != s.seen.end()) co_return it->second;
    const size_t slash = k.find('/', all.size());
    const std::string group = slash == std::string::npos ? all : k.substr(0, slash + 1);
    if (!s.read_groups.count(group)) {
      const json got = co_await call(a, "/v3/kv/range", body::prefix(group, prefix_end(group)));
      if (!s.milestones) {
        s.milestones_from = i64(got.at("header"), "revision") + 1;
        s.milestones = open_watch(a, body::watch(all, prefix_end(all), s.milestones_from));
      }
      for (const json& kv : got.value("kvs", json::array())) s.seen[unb64(kv.value("key", ""))] = unb64(kv.value("value", ""));
      s.read_groups.insert(group);
      if (auto it = s.seen.find(k); it != s.seen.end()) co_return it->second;
    }
    if (!wait) co_return std::nullopt;
    for (;;) {
      while (co_await events(a, *s.milestones, Clock::now() + interval_)) {
        take();
        if (auto it = s.seen.find(k); it != s.seen.end()) co_return it->second;
      }
      if (beat_between) co_await beat(a);
    }
  }

  // get(key) through LeaseKeeper::wait: a range; absent, a watch from after
  // it, kept across slices; a beat between slices.
  Task<std::string> get(Agent& a, const std::string& k, bool beat_between) {
    AgentState& s = st(a);
    for (;;) {
      if (!(s.watch && s.watched == k)) {
        close_conn(s.watch);
        const json got = co_await call(a, "/v3/kv/range", body::keyed(k));
        if (got.contains("kvs") && !got["kvs"].empty()) co_return unb64(got["kvs"][0].value("value", ""));
        s.watch = open_watch(a, body::watch(k, "", i64(got.at("header"), "revision") + 1));
        s.watched = k;
      }
      while (co_await events(a, *s.watch, Clock::now() + interval_))
        for (const json& e : take_events(*s.watch))
          if (e.value("type", "PUT") == "PUT") {
            close_conn(s.watch);
            s.watched.clear();
            co_return unb64(e["kv"].value("value", ""));
          }
      if (beat_between) co_await beat(a);
    }
  }

  // ---- the lease: EtcdLiveness and LeaseKeeper -----------------------------

  Task<int64_t> keep_alive(Agent& a) {
    const auto sent = Clock::now();
    const json r = co_await call(a, "/v3/lease/keepalive", body::lease_id(st(a).lease));
    const int64_t ttl = std::max<int64_t>(0, i64(r.contains("result") ? r["result"] : r, "TTL"));
    if (ttl > 0) st(a).holds_until = sent + std::chrono::seconds(ttl);
    co_return ttl;
  }
  Task<> grant(Agent& a) {
    const int64_t ttl = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o_.keep_alive * 3)));
    const auto sent = Clock::now();
    const json r = co_await call(a, "/v3/lease/grant", body::ttl(ttl));
    st(a).lease = i64(r, "ID");
    st(a).holds_until = sent + std::chrono::seconds(i64(r, "TTL"));
  }
  // EtcdLiveness::beat: a keep-alive; a lapsed lease is granted again and the alive key put back.
  Task<> beat(Agent& a) {
    AgentState& s = st(a);
    s.last_beat = Clock::now();
    if (s.lease == 0 || co_await keep_alive(a) > 0) co_return;
    ++sh_.regranted;
    co_await grant(a);
    if (s.slot >= 0)
      co_await call(a, "/v3/kv/put", body::put(alive_key(s.round, s.slot), "", s.lease));
  }
  Task<> beat_if_due(Agent& a) {
    if (st(a).lease != 0 && Clock::now() - st(a).last_beat >= interval_) co_await beat(a);
  }

  const Options& o_;
  Shared& sh_;
  const std::string run_;
  std::vector<Agent> agents_;
  std::vector<AgentState> st_;
  const Clock::duration interval_;
  std::set<int> in_barrier_;
  bool barrier_open_ = false;
  std::vector<Agent*> leaving_;
  size_t finished_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  using bench_args::arg;
  std::string etcd;
  if (!bench_args::parse("etcd_sim", argc, argv,
                         {arg("--etcd", etcd), arg("--nodes", o.nodes), arg("--nproc", o.nproc), arg("--procs", o.procs),
                          arg("--timeout", o.timeout), arg("--recover", o.recover), arg("--spread", o.spread),
                          arg("--keep-alive", o.keep_alive)}))
    return 2;
  for (std::stringstream in(etcd); std::getline(in, o.etcd.emplace_back(), ',');) {
  }
  o.etcd.erase(std::remove(o.etcd.begin(), o.etcd.end(), ""), o.etcd.end());
  const bool members_ok = !o.etcd.empty() && std::all_of(o.etcd.begin(), o.etcd.end(), [](const std::string& e) {
    in_addr probe{};
    const auto colon = e.find(':');
    return colon != std::string::npos && inet_pton(AF_INET, e.substr(0, colon).c_str(), &probe) == 1 &&
           atoi(e.c_str() + colon + 1) > 0 && atoi(e.c_str() + colon + 1) < 65536;
  });
  if (!members_ok || o.nodes <= 0 || o.nproc <= 0 || o.procs <= 0 || o.procs > o.nodes || o.timeout <= 0 ||
      o.keep_alive <= 0) {
    fprintf(stderr, "etcd_sim: --etcd IP:PORT,... is required; --nodes, --nproc, --timeout and --keep-alive must be "
                    "positive; 1 <= --procs <= --nodes\n");
    return 2;
  }
  const rlim_t open_files = bench_procs::open_files_to_hard_limit();
  const rlim_t need = static_cast<rlim_t>(o.nodes / o.procs + 1) * 4 + 64;
  if (open_files < need) {
    fprintf(stderr, "etcd_sim: %d agents a process hold up to %lu descriptors, over RLIMIT_NOFILE's %lu: raise --procs\n",
            o.nodes / o.procs, static_cast<unsigned long>(need), static_cast<unsigned long>(open_files));
    return 1;
  }
  const size_t bytes = sizeof(Shared) + sizeof(std::atomic<int>) * static_cast<size_t>(o.nodes);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return perror("etcd_sim: mmap"), 1;
  auto* sh = new (m) Shared();
  for (int r = 0; r < o.nodes; ++r) new (sh->ranks() + r) std::atomic<int>(0);
  const std::string run = "sim" + std::to_string(getpid());
  sh->t_start = now_ns();
  bench_procs::in_processes("etcd_sim", o.nodes, o.procs, sh->failures,
                            [&](int first, int last) { Sim(o, *sh, run, first, last).run(); });
  bool ranks_ok = true;
  for (int r = 0; r < o.nodes; ++r) ranks_ok = ranks_ok && sh->ranks()[r] == 1;
  auto at = [&](int64_t t) { return t == 0 ? -1.0 : static_cast<double>(t - sh->t_start) / 1e9; };
  auto span = [](int64_t a, int64_t b) { return a == 0 || b == 0 ? -1.0 : static_cast<double>(b - a) / 1e9; };
  printf("{\"store\": \"etcd\", \"generator\": \"etcd_sim\", \"nodes\": %d, \"seconds\": %.3f, \"failures\": %d, "
         "\"ranks_ok\": %s, \"one_master\": %s, \"lapses\": %d, \"regranted\": %d, \"retries\": %d",
         o.nodes, at(sh->t_done0), sh->failures.load(), ranks_ok ? "true" : "false",
         sh->masters_differ == 0 ? "true" : "false", sh->lapses.load(), sh->regranted.load(), sh->retries.load());
  if (o.recover)
    printf(", \"recovery_s\": %.3f, \"abort_push_s\": %.3f, \"rejoin_s\": %.3f, \"assign_s\": %.3f, \"rejoin_assign_s\": %.3f",
           span(sh->t_failed, sh->t_done1), span(sh->t_failed, sh->t_woken), span(sh->t_woken, sh->t_complete1),
           span(sh->t_complete1, sh->t_done1), span(sh->t_woken, sh->t_done1));
  // The assignment's parts, each from the end of the one before: to the assigner holding every
  // descriptor, to its last assignment written, to group rank 0's master written, to the last agent
  // holding its assignment and master.
  if (o.recover)
    printf(", \"assign_read_s\": %.3f, \"assign_write_s\": %.3f, \"master_s\": %.3f, \"last_agent_s\": %.3f",
           span(sh->t_complete1, sh->t_read1), span(sh->t_read1, sh->t_published1),
           span(sh->t_published1, sh->t_master1), span(sh->t_master1, sh->t_done1));
  // Where the recovery lay on the steady clock (Python's time.monotonic_ns is the same clock), for
  // etcd's CPU over it (bench/etcd.py samples the members), and what the generator itself spent.
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  printf(", \"failed_ns\": %ld, \"done1_ns\": %ld, \"generator_cpu\": %.2f", static_cast<long>(sh->t_failed.load()),
         static_cast<long>(sh->t_done1.load()),
         secs(self.ru_utime) + secs(self.ru_stime) + secs(children.ru_utime) + secs(children.ru_stime));
  printf(", \"requests\": {");
  for (size_t i = 0; i < std::size(kPaths); ++i) printf("%s\"%s\": %ld", i ? ", " : "", kPaths[i], static_cast<long>(sh->requests[i].load()));
  printf("}");
  if (o.procs > 1) printf(", \"procs\": %d", o.procs);
  printf("}\n");
  return sh->failures == 0 && ranks_ok && sh->masters_differ == 0 ? 0 : 1;
}
