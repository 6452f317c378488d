// etcd_sim's agents as the product's store objects hold them: per agent,
// what EtcdStore, EtcdLiveness and LeaseKeeper keep between calls
// (AgentState), and each primitive as the product sends it over etcd's gRPC
// API (rendezvous/etcd_store.h: how each maps onto etcd), one coroutine per
// primitive on the process's one loop (etcd_sim_loop.h). The sequence that
// calls them, C10dRendezvous's, is etcd_sim.cc's.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "etcd_sim_loop.h"
#include "etcd_sim_wire.h"

namespace etcd_sim {

struct Options {
  std::vector<std::string> etcd;
  int nodes = 1000, nproc = 8, procs = 1;
  double timeout = 120, keep_alive = 1.0;
  bool recover = false, spread = false;
  bool master_in_assignment = false;  // a what-if, not the product (etcd_sim.cc, assign)
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

inline int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
inline void at_least(std::atomic<int64_t>& v, int64_t t) {
  for (int64_t seen = v.load(); seen < t && !v.compare_exchange_weak(seen, t);) {
  }
}

// etcd's default --max-txn-ops: EtcdStore reads and writes many keys 128 a txn.
constexpr size_t kMaxTxnOps = 128;
constexpr int64_t kRangePage = 2048;  // EtcdStore's

// A key's range end for "every key under it" (etcd/wire's prefix rule).
inline std::string prefix_end(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff) p.pop_back();
  if (!p.empty()) ++p.back();
  return p;
}

// Per agent, what the product's objects hold between calls.
struct AgentState {
  std::string adder;  // EtcdStore::adder_
  int adds = 0;
  int64_t lease = 0;
  std::string alive_name;  // EtcdLiveness::alive_key_: the last join's alive key
  Clock::time_point last_beat;  // LeaseKeeper::last_
  std::unique_ptr<Conn> watch;  // EtcdKeyWait::watch_, kept while waits are on one key
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

class SimStore : protected Loop {
 public:
  SimStore(const Options& o, Shared& sh, std::string run, int first, int last)
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

 protected:
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
  AgentState& st(Agent& a) { return st_[&a - agents_.data()]; }

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
  // them stepped out and the config is this job's, its keys and the round read where not. A join
  // (EtcdStore::join): the marker holds `record`, and `alive_prefix` + its name, on the lease, rides along.
  Task<int64_t> add(Agent& a, const std::string& k, int open = -1, int check = -1, const std::string& record = "",
                    const std::string& alive_prefix = "") {
    AgentState& s = st(a);
    const std::string name = s.adder + "-" + std::to_string(++s.adds);
    const std::string marker = k + "/adds/" + name;
    json request = body::add(k, marker, record);
    if (!alive_prefix.empty()) {
      s.alive_name = alive_prefix + name;
      request["success"].push_back(body::op_put(s.alive_name, "", s.lease));
    }
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

  // read_etcd_prefix: every key under `prefix`, as pages of one snapshot, each to `each`; the snapshot's revision.
  Task<int64_t> read_prefix(Agent& a, const std::string& prefix, const std::function<void(const json&)>& each) {
    const std::string end = prefix_end(prefix);
    int64_t revision = 0;
    std::string from = prefix;
    for (bool more = true; more;) {
      const json r = co_await call(a, "/v3/kv/range", body::page(from, end, kRangePage, revision));
      if (revision == 0) revision = i64(r.at("header"), "revision");
      const json& kvs = r.value("kvs", json::array());
      for (const auto& kv : kvs) each(kv);
      more = r.value("more", false) && !kvs.empty();
      if (more) from = unb64(kvs.back().value("key", "")) + '\0';
    }
    co_return revision;
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
      revision = co_await read_prefix(a, low.substr(0, common), [&](const json& kv) {
        if (auto it = wanted.find(unb64(kv.value("key", ""))); it != wanted.end()) values[it->second] = unb64(kv.value("value", ""));
      });
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

  // EtcdRoster::read: the round's markers, pages of one snapshot, sorted by create revision.
  struct Joiner {
    std::string name, record;
    int64_t created = 0;
  };
  Task<std::vector<Joiner>> roster(Agent& a, int round) {
    const std::string prefix = rk(round, "count/adds/");
    std::vector<Joiner> out;
    co_await read_prefix(a, prefix, [&](const json& kv) {
      out.push_back({unb64(kv.value("key", "")).substr(prefix.size()), unb64(kv.value("value", "")), i64(kv, "create_revision")});
    });
    std::sort(out.begin(), out.end(), [](const Joiner& x, const Joiner& y) { return x.created < y.created; });
    co_return out;
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

  // EtcdLiveness::joining, before its txn: the last round's watch stopped (its connection kept for the next),
  // the lease renewed (or granted) unless its last renewal holds for an interval and a half yet.
  Task<> renew_before_joining(Agent& a) {
    AgentState& s = st(a);
    if (s.alive) stop_watch(*s.alive);
    if (s.lease == 0 || s.holds_until - Clock::now() <= interval_ * 3 / 2) {
      if (s.lease == 0 || co_await keep_alive(a) == 0) co_await grant(a);
      s.last_beat = Clock::now();
    }
  }

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
    if (!s.alive_name.empty()) co_await call(a, "/v3/kv/put", body::put(s.alive_name, "", s.lease));
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
};

}  // namespace etcd_sim
