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
// wait_for_completion, publish_assignments, assign, recover), over the
// store's primitives in etcd_sim_store.h; if the product's sequence
// changes, these must follow. Checked against the real
// code by the members' request counts (bench/RESULTS.md, issue 45).
//
//   etcd_sim --etcd h1:p1,h2:p2,h3:p3 --nodes 1000 [--nproc 8] [--recover 1]
//            [--spread 1] [--keep-alive S] [--procs K] [--timeout S]
//            [--master-in-assignment 1]
//
// --recover 1: then in-job recovery, as rdzv_load --recover 1 drives it
// through the real code: once every agent holds round 0, agent 0 publishes
// a failure record and the `abort` event; every agent, woken by its watch
// on the round's event, joins round 1 expecting N with the check that
// nothing else changed on its ADD, which opens the round
// (C10dBackend::rejoin, C10dRendezvous::rejoin_if_unchanged).
// --spread 1: agent i talks to member i mod M only (rdzv_load --spread 1), as
// the product's nodes each start at a member of their own (etcd_options).
// --master-in-assignment 1: a what-if, not the product: each node's
// descriptor would carry the port it would serve the workers' store on, and
// the assigner writes rank 0's address and port into every assignment:
// group rank 0 writes no master, and no member waits for one.
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
#include "etcd_sim_store.h"
#include "procs.h"

using namespace etcd_sim;

namespace {

class Sim : SimStore {
 public:
  Sim(const Options& o, Shared& sh, std::string run, int first, int last)
      : SimStore(o, sh, std::move(run), first, last) {}

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
    // EtcdLiveness::joining, then EtcdStore::join: one txn, the add's marker holding the descriptor and the
    // alive key, named as the marker, on the lease (rendezvous/etcd_roster.h).
    co_await renew_before_joining(a);
    const int slot = static_cast<int>(co_await add(a, rk(round, "count"), open ? round : -1, std::exchange(s.check_from, -1),
                                                   describe(a.index), rk(round, "alive/"))) - 1;
    // milestones_follow: a count first added to after the watch began: the round's group is not read.
    if (s.milestones && s.added_created >= s.milestones_from) s.read_groups.insert(mk(round, ""));
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
    if (assigner == slot) co_await publish_assignments(a, round, members);
    // The round's `assigned` milestone, then this node's assignment in one read (get_if_set).
    co_await milestone(a, mk(round, "assigned"), true, true);
    const json got = co_await call(a, "/v3/kv/range", body::keyed(rk(round, "assign/" + std::to_string(slot))));
    if (!got.contains("kvs") || got["kvs"].empty()) throw std::runtime_error("assigned, but no assignment");
    std::string mine = unb64(got["kvs"][0].value("value", ""));
    std::string carried;  // --master-in-assignment
    if (const auto hash = mine.find('#'); hash != std::string::npos) carried = mine.substr(hash + 1), mine.resize(hash);
    co_await beat_if_due(a);
    std::vector<std::string> f;
    for (std::stringstream in(mine); std::getline(in, f.emplace_back(), '|');) {
    }
    s.rank = std::stoi(f.at(0));
    if (!carried.empty()) {
      s.master = carried;
      if (s.rank == 0 && round > 0) sh_.t_master1 = now_ns();
    } else if (s.rank == 0) {
      // member_addrs, for the port picker, unless they came with the assignment
      if (std::count(mine.begin(), mine.end(), '|') < 4) co_await roster(a, round);
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
    json create = body::watch(prefix, prefix_end(prefix), std::stoll(alive.substr(0, alive.find('/'))) + 1);
    create["prev_kv"] = true;
    if (s.alive) restart_watch(*s.alive, create);
    else s.alive = open_watch(a, create);
    s.alive->liveness = true;
  }

  Task<> publish_assignments(Agent& a, int round, int members) {
    // joiners: the round's markers, by their joins' revisions
    const auto joined = co_await roster(a, round);
    std::vector<std::string> all;
    for (int i = 0; i < members; ++i) all.push_back(joined.at(i).record);
    if (round > 0) sh_.t_read1 = now_ns();
    co_await beat_if_due(a);
    // EtcdLiveness::snapshot: the names of the alive keys; the members' missing are the dead slots.
    const std::string prefix = rk(round, "alive/");
    const json present = co_await call(a, "/v3/kv/range", body::span(prefix, prefix_end(prefix), "keys_only"));
    std::set<std::string> there;
    for (const auto& kv : present.value("kvs", json::array())) there.insert(unb64(kv.value("key", "")).substr(prefix.size()));
    std::string alive = std::to_string(i64(present.at("header"), "revision")) + "/" + std::to_string(joined.at(members - 1).created);
    for (int i = 0, first = 1; i < members; ++i)
      if (!there.count(joined[i].name)) alive += (first ? ":" : ",") + std::to_string(i), first = 0;
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
    // --master-in-assignment: rank 0's address and the port its descriptor would carry, in every record.
    const std::string master = o_.master_in_assignment ? "#" + all[order.front()].substr(0, all[order.front()].find('|')) + ":29500" : "";
    for (int i = 0; i < members; ++i) {
      keys.push_back(rk(round, "assign/" + std::to_string(i)));
      values.push_back(std::to_string(rank_of[i]) + "|" + std::to_string(base[i]) + "|" +
                       std::to_string(members * o_.nproc) + "|" + alive + (rank_of[i] == 0 ? addrs : "") + master);
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
                          arg("--keep-alive", o.keep_alive), arg("--master-in-assignment", o.master_in_assignment)}))
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
