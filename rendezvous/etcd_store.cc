#include "rendezvous/etcd_store.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "etcd/client.h"
#include "etcd/endpoints.h"
#include "etcd/options.h"
#include "etcd/watch.h"
#include "net/endpoint.h"
#include "rendezvous/etcd_errors.h"
#include "rendezvous/etcd_key_wait.h"
#include "rendezvous/etcd_milestones.h"
#include "rendezvous/etcd_reads.h"
#include "rendezvous/etcd_roster.h"

namespace cxxrun::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// compare_set's compare of etcd key `k`: absent (its create revision 0) for
// an empty `expected`, else holding it.
etcd::Compare holds_expected(const std::string& k, const std::string& expected) {
  using etcd::Compare;
  return expected.empty() ? Compare::create_revision_is(k, Compare::Result::equal, 0)
                          : Compare::value_is(k, Compare::Result::equal, expected);
}

// compare_set inside the add's transaction: applied with it, once however
// often the add is sent; only the first of many finds the key as expected.
etcd::Op compare_set_op(const std::string& k, const store::StoreClient::CompareSet& c) {
  return etcd::Op::txn({holds_expected(k, c.expected)}, {etcd::Op::put(k, c.desired)});
}

// The answers to [range counter, range key...]: the counter's count (its
// version, add's rule) and each key's value (none: absent).
store::StoreClient::CountAndValues count_and_values(const std::vector<etcd::OpResult>& responses, size_t ranges) {
  store::StoreClient::CountAndValues out;
  if (!responses.empty() && !responses[0].kvs.empty()) out.count = responses[0].kvs.front().version;
  for (size_t i = 1; i < ranges; ++i) {
    if (i < responses.size() && !responses[i].kvs.empty()) out.values.push_back(responses[i].kvs.front().value);
    else out.values.emplace_back();
  }
  return out;
}

// 64 random bits and the pid: no two adders of a job share a name.
std::string adder_name() {
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) | random();
  return std::to_string(getpid()) + "-" + std::to_string(bits);
}

}  // namespace

EtcdStore::EtcdStore(const EtcdSettings& settings, Duration timeout)
    : settings_(settings), prefix_(settings.prefix + "/"), timeout_(timeout), adder_(adder_name()) {
  try {
    const etcd::Options options = etcd_options(settings_, timeout_);
    client_ = std::make_unique<etcd::Client>(options);
    milestones_ = std::make_unique<EtcdMilestones>(settings_, *client_, options);
    key_wait_ = std::make_unique<EtcdKeyWait>(settings_, *client_, prefix_);
  } catch (const etcd::EtcdAuthError& e) {
    throw store::StoreAuthError(e.what());
  } catch (const etcd::EtcdError& e) {
    throw store::StoreError(e.what());
  }
}

EtcdStore::~EtcdStore() = default;

template <typename F>
auto EtcdStore::guarded(const char* what, const std::string& key, F&& call) {
  return as_store_errors(settings_, what, key, std::forward<F>(call));
}

void EtcdStore::set(const std::string& key, const std::string& value) {
  guarded("set", key, [&] {
    resend_while_indeterminate(Clock::now() + timeout_, [&](milliseconds t) { client_->put(etcd_key(key), value, 0, t); });
  });
}

std::string EtcdStore::get(const std::string& key) { return get(key, timeout_); }

std::string EtcdStore::get(const std::string& key, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  if (milestones_->covers(etcd_key(key))) {
    if (auto value = milestones_->value("get", key, etcd_key(key), deadline, true, timeout_)) return *value;
    throw store::StoreTimeout("etcd wait " + key + ": the key was not written in time");
  }
  return key_wait_->value("get", key, deadline, timeout_);
}

std::optional<std::string> EtcdStore::get_if_set(const std::string& key) {
  if (milestones_->covers(etcd_key(key))) return milestones_->value("get", key, etcd_key(key), Clock::now(), false, timeout_);
  auto got = guarded("get", key, [&] { return client_->range(etcd_key(key)); });
  if (!got.kv) return std::nullopt;
  return got.kv->value;
}

std::vector<std::optional<std::string>> EtcdStore::get_if_set_each(const std::vector<std::string>& keys) {
  return read_many("get_if_set", keys).values;
}

int64_t EtcdStore::add(const std::string& key, int64_t delta) {
  const std::string k = etcd_key(key);
  if (delta == 0) {
    auto got = guarded("add", key, [&] { return client_->range(k); });
    return got.kv ? got.kv->version : 0;
  }
  if (delta != 1) throw std::invalid_argument("etcd store: add counts by 0 or 1 only, not " + std::to_string(delta));
  return *add_one(key, {});
}

int64_t EtcdStore::add_and_compare_set(const std::string& counter, const CompareSet& also) {
  return *add_one(counter, {compare_set_op(etcd_key(also.key), also)});
}

store::StoreClient::AddedOrRead EtcdStore::add_if_unchanged(const std::string& counter, const CompareSet& also,
                                                            const Unchanged& unchanged) {
  using etcd::Compare;
  std::vector<Compare> check{Compare::version_is(etcd_key(unchanged.counter), Compare::Result::equal, unchanged.count)};
  std::vector<etcd::Op> reads{etcd::Op::get(etcd_key(unchanged.counter))};
  for (const auto& [key, value] : unchanged.expected) {
    check.push_back(holds_expected(etcd_key(key), value.value_or("")));
    reads.push_back(etcd::Op::get(etcd_key(key)));
  }
  for (const auto& key : unchanged.reads) reads.push_back(etcd::Op::get(etcd_key(key)));
  // An empty value cannot be told from absence here (holds_expected's
  // rule); the algorithm expects none. The marker's compare and read come on top.
  const bool empty_expected = std::any_of(unchanged.expected.begin(), unchanged.expected.end(),
                                          [](const auto& e) { return e.second && e.second->empty(); });
  if (empty_expected || check.size() + 1 > kEtcdMaxTxnOps || reads.size() + 1 > kEtcdMaxTxnOps)
    return StoreClient::add_if_unchanged(counter, also, unchanged);
  std::vector<etcd::OpResult> read_back;
  AddedOrRead out;
  out.count = add_one(counter, {compare_set_op(etcd_key(also.key), also)}, std::move(check), reads, &read_back);
  if (!out.count) out.read = count_and_values(read_back, reads.size());
  return out;
}

std::optional<int64_t> EtcdStore::add_one(const std::string& key, std::vector<etcd::Op> with,
                                          std::vector<etcd::Compare> check, std::vector<etcd::Op> reads,
                                          std::vector<etcd::OpResult>* read_back) {
  const std::string k = etcd_key(key);
  // The read after the write in one transaction sees it: the version it
  // returns is this add's own count. The marker makes sending it again safe.
  const std::string name = adder_ + "-" + std::to_string(++adds_);
  const std::string marker = EtcdRoster::marker_prefix(k) + name;
  using etcd::Compare;
  check.insert(check.begin(), Compare::create_revision_is(marker, Compare::Result::equal, 0));
  reads.insert(reads.begin(), etcd::Op::get(marker));
  // A join's record is its marker's value, and its alive key rides along:
  // one write a joiner (etcd_roster.h).
  const Join* joining = joining_ && joining_->counter == key ? joining_ : nullptr;
  std::vector<etcd::Op> count = {etcd::Op::put(k, ""), etcd::Op::get(k),
                                 etcd::Op::put(marker, joining ? joining->record : "")};
  std::optional<size_t> alive_at;  // the alive key's put, where the join has one
  if (joining) {
    joined_name_ = name;
    if (joining->lease != 0 && !joining->alive_prefix.empty()) {
      alive_at = count.size();
      count.push_back(etcd::Op::put(etcd_key(joining->alive_prefix + name), "", joining->lease));
    }
  }
  for (auto& op : with) count.push_back(std::move(op));
  const auto deadline = Clock::now() + timeout_;
  etcd::TxnResult r;
  const auto send = [&] {
    resend_while_indeterminate(deadline, [&](milliseconds t) { r = client_->txn(check, count, reads, t); });
  };
  guarded("add", key, [&] {
    try {
      send();
    } catch (const etcd::EtcdRequestError&) {
      // A refusal of the alive key's lease (nothing applied): once more,
      // on a new one.
      if (!alive_at || !joining->lease_gone) throw;
      count[*alive_at] = etcd::Op::put(etcd_key(joining->alive_prefix + name), "", joining->lease_gone());
      send();
    }
  });
  if (r.succeeded) {
    if (r.responses.size() < 2 || r.responses[1].kvs.empty())
      throw store::StoreError("etcd add " + key + ": the transaction did not read the key back");
    added_ = k;
    added_created_ = r.responses[1].kvs.front().create_revision;
    return r.responses[1].kvs.front().version;
  }
  // No marker: the check failed, and nothing was written. (A check only
  // fails the same way again: what it compares only moves on.)
  if (read_back && !r.responses.empty() && r.responses.front().kvs.empty()) {
    read_back->assign(r.responses.begin() + 1, r.responses.end());
    return std::nullopt;
  }
  // An earlier send of this add applied: the count as of its revision.
  if (r.responses.empty() || r.responses.front().kvs.empty())
    throw store::StoreError("etcd add " + key + ": the marker of an applied add is gone");
  const int64_t applied = r.responses.front().kvs.front().create_revision;
  auto then = guarded("add", key, [&] { return client_->range_at(k, applied, remaining(deadline)); });
  if (!then.kv) throw store::StoreError("etcd add " + key + ": the counter was absent at its own add");
  added_ = k;
  added_created_ = then.kv->create_revision;
  return then.kv->version;
}

store::StoreClient::Joined EtcdStore::join(const Join& j) {
  // The add's own paths (add_if_unchanged's fallback included) carry it.
  joining_ = &j;
  joined_name_.clear();
  struct Done {
    const Join*& joining;
    ~Done() { joining = nullptr; }
  } done{joining_};
  Joined out;
  out.added = add_of(j);
  if (out.added.count) out.name = joined_name_;
  return out;
}

const EtcdRoster& EtcdStore::roster(const std::string& counter, int members) {
  const std::string k = etcd_key(counter);
  // The first joiners of a round are fixed once joined: a read that holds
  // `members` of them serves until the next round.
  if (!roster_ || roster_->counter != k || roster_->joiners.size() < static_cast<size_t>(members))
    roster_ = std::make_unique<EtcdRoster>(
        guarded("read the joiners", counter, [&] { return EtcdRoster::read(*client_, k, timeout_); }));
  return *roster_;
}

std::vector<std::string> EtcdStore::joiners(const std::string& counter, const std::string& record_prefix, int n,
                                            std::optional<Duration> wait) {
  (void)record_prefix;
  (void)wait;  // each joiner's record came in its add's transaction: nothing to wait for
  roster_.reset();
  const EtcdRoster& r = roster(counter, n);
  if (r.joiners.size() < static_cast<size_t>(n))
    throw store::StoreError("etcd: round " + counter + " counts " + std::to_string(n) + " joiners, but only " +
                            std::to_string(r.joiners.size()) + " left their record (were the job's keys removed?)");
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(r.joiners[i].record);
  return out;
}

std::string EtcdStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  // Only the first of many writers finds the key as expected (absent, or
  // the round they all move on from). etcd runs a transaction through Raft
  // even when its compare fails: a read answers the others without a
  // proposal, and a read costs a member a fraction of a write.
  auto got = guarded("compare_set", key, [&] { return client_->range(etcd_key(key)); });
  return compare_set_after(key, expected, desired, got.kv ? std::optional(got.kv->value) : std::nullopt);
}

std::string EtcdStore::compare_set_after(const std::string& key, const std::string& expected,
                                         const std::string& desired, const std::optional<std::string>& now) {
  if (auto answer = store::compare_set_without_write(now, expected)) return *answer;
  return compare_set_txn(key, expected, desired, {});
}

std::string EtcdStore::compare_set_txn(const std::string& key, const std::string& expected, const std::string& desired,
                                       const std::vector<etcd::Op>& also) {
  const std::string k = etcd_key(key);
  std::vector<etcd::Op> success{etcd::Op::put(k, desired)}, failure{etcd::Op::get(k)};
  success.insert(success.end(), also.begin(), also.end());
  failure.insert(failure.end(), also.begin(), also.end());
  // Sent again if etcd may or may not have applied it: a second send finds
  // the value it wrote and reads it back, which is what the first answers
  // (and writes `also` again, the same values).
  etcd::TxnResult r;
  guarded("compare_set", key, [&] {
    resend_while_indeterminate(Clock::now() + timeout_, [&](milliseconds t) {
      r = client_->txn({holds_expected(k, expected)}, success, failure, t);
    });
  });
  if (r.succeeded) return desired;
  // Deleted since the read: torch's quirk again.
  if (r.responses.empty() || r.responses.front().kvs.empty()) return expected;
  return r.responses.front().kvs.front().value;
}

std::string EtcdStore::compare_set_and_set(const CompareSet& first, const std::string& key, const std::string& value) {
  return compare_set_txn(first.key, first.expected, first.desired, {etcd::Op::put(etcd_key(key), value)});
}

// Every key read in one transaction of ranges (read-only: etcd answers it
// as it answers a range, without Raft), then a write only where a key is as
// expected: a re-joining agent's opening of the round and check of the
// job's config cost one request where they cost two.
std::vector<std::string> EtcdStore::compare_sets(const std::vector<CompareSet>& each) {
  if (each.size() < 2 || each.size() > kEtcdMaxTxnOps) return store::StoreClient::compare_sets(each);
  std::vector<std::string> keys;
  for (const CompareSet& c : each) keys.push_back(c.key);
  const EtcdReads now = read_many("compare_set", keys);
  std::vector<std::string> out;
  for (size_t i = 0; i < each.size(); ++i)
    out.push_back(compare_set_after(each[i].key, each[i].expected, each[i].desired, now.values[i]));
  return out;
}

// A count read with the keys, in one transaction of ranges: the count is
// the counter's version (add's rule).
store::StoreClient::CountAndValues EtcdStore::add_and_get_if_set_each(const std::string& counter, int64_t delta,
                                                              const std::vector<std::string>& keys) {
  if (delta != 0 || keys.size() + 1 > kEtcdMaxTxnOps) return store::StoreClient::add_and_get_if_set_each(counter, delta, keys);
  std::vector<etcd::Op> ops{etcd::Op::get(etcd_key(counter))};
  for (const auto& k : keys) ops.push_back(etcd::Op::get(etcd_key(k)));
  auto r = guarded("add", counter, [&] { return client_->txn({}, ops); });
  return count_and_values(r.responses, ops.size());
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  const EtcdReads got = read_many("check", keys);
  return std::all_of(got.values.begin(), got.values.end(), [](const auto& v) { return v.has_value(); });
}

EtcdReads EtcdStore::read_many(const char* what, const std::vector<std::string>& keys) {
  std::vector<std::string> etcd_keys;
  for (const auto& key : keys) etcd_keys.push_back(etcd_key(key));
  return guarded(what, keys.empty() ? "" : keys.front(), [&] { return read_etcd_keys(*client_, etcd_keys, timeout_); });
}

void EtcdStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  if (keys.size() == 1) return wait_one(keys[0], Clock::now() + timeout);
  wait_and_get(keys, timeout);
}

// The values come with the read, and those of keys still absent with the
// watch's events: a round's assigner read every descriptor twice (a wait,
// then a multi_get), 2N/128 transactions one after another before anyone
// could have an assignment.
std::vector<std::string> EtcdStore::wait_and_get(const std::vector<std::string>& keys, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  EtcdReads got = read_many("wait", keys);
  std::map<std::string, size_t> waiting;  // etcd key -> index
  for (size_t i = 0; i < keys.size(); ++i)
    if (!got.values[i]) waiting.emplace(etcd_key(keys[i]), i);
  if (!waiting.empty()) {
    // One watch on the keys' common prefix, not one per key: a thousand
    // descriptors still to come are a thousand events on one stream.
    const std::string prefix = common_prefix(waiting.begin()->first, waiting.rbegin()->first);
    auto watch = guarded("wait", keys.front(), [&] {
      return std::make_unique<etcd::Watch>(etcd_options(settings_, remaining(deadline)), prefix,
                                           etcd::Watch::Scope::prefix, got.revision + 1);
    });
    while (!waiting.empty()) {
      std::optional<std::vector<etcd::WatchEvent>> events;
      try {
        events = watch->next(deadline);
      } catch (const etcd::EtcdError&) {
        rethrow_as_store_error(etcd_context(settings_, "wait", keys.front()));
      }
      if (!events)
        throw store::StoreTimeout("etcd wait: " + std::to_string(waiting.size()) + " of " + std::to_string(keys.size()) +
                                  " keys were not written in time, the first " + waiting.begin()->first);
      for (auto& e : *events)
        if (auto it = waiting.find(e.kv.key); it != waiting.end() && e.type == etcd::WatchEvent::Type::put) {
          got.values[it->second] = std::move(e.kv.value);
          waiting.erase(it);
        }
    }
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (auto& v : got.values) out.push_back(std::move(*v));
  return out;
}

void EtcdStore::wait_one(const std::string& key, Clock::time_point deadline) {
  if (milestones_->covers(etcd_key(key))) {
    if (milestones_->value("wait", key, etcd_key(key), deadline, true, timeout_)) return;
    throw store::StoreTimeout("etcd wait " + key + ": the key was not written in time");
  }
  key_wait_->value("wait", key, deadline, timeout_);
}

void EtcdStore::expect_waits_under(const std::string& prefix) { milestones_->expect_under(etcd_key(prefix)); }

void EtcdStore::milestones_follow(const std::string& group, const std::string& after) {
  // The revision of `after`'s first write: the counter's create revision,
  // as this store's add read it.
  if (added_ == etcd_key(after) && added_created_ > 0) milestones_->follow(etcd_key(group), added_created_);
}

int64_t EtcdStore::num_keys() {
  auto r = guarded("num_keys", prefix_, [&] { return client_->range_prefix(prefix_); });
  return static_cast<int64_t>(r.kvs.size());
}

bool EtcdStore::delete_key(const std::string& key) {
  return guarded("delete", key, [&] { return client_->delete_range(etcd_key(key)); }) > 0;
}

void EtcdStore::append(const std::string& key, const std::string& value) {
  using etcd::Compare;
  const std::string k = etcd_key(key);
  const auto deadline = Clock::now() + timeout_;
  // Appends are rare (a failure record per failing node): a
  // compare-and-swap loop is enough.
  while (Clock::now() < deadline) {
    auto got = guarded("append", key, [&] { return client_->range(k); });
    const Compare unchanged = got.kv ? Compare::mod_revision_is(k, Compare::Result::equal, got.kv->mod_revision)
                                     : Compare::create_revision_is(k, Compare::Result::equal, 0);
    const std::string next = (got.kv ? got.kv->value : "") + value;
    const auto sent = guarded("append", key, [&]() -> std::optional<bool> {
      try {
        return client_->txn({unchanged}, {etcd::Op::put(k, next)}, {}, remaining(deadline)).succeeded;
      } catch (const etcd::EtcdIndeterminate&) {
        return std::nullopt;  // read below whether it applied
      }
    });
    if (sent.value_or(false)) return;
    // An overloaded etcd answered "request timed out" (a node's failure
    // record, at 10,000 agents: the job was never told to stop). Applied,
    // the key holds exactly what this append wrote; sent again blindly,
    // the record would be there twice.
    if (!sent) {
      auto now = guarded("append", key, [&] { return client_->range(k, remaining(deadline)); });
      if (now.kv && now.kv->value == next) return;
      std::this_thread::sleep_until(std::min(deadline, Clock::now() + milliseconds(50)));
    }
  }
  throw store::StoreTimeout("etcd append " + key + ": every attempt raced another writer");
}

std::vector<std::string> EtcdStore::multi_get(const std::vector<std::string>& keys) {
  EtcdReads got = read_many("multi_get", keys);
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!got.values[i]) throw store::StoreError("etcd multi_get: no key " + keys[i]);
    out.push_back(std::move(*got.values[i]));
  }
  return out;
}

void EtcdStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size()) throw std::invalid_argument("multi_set: as many values as keys");
  for (size_t at = 0; at < keys.size(); at += kEtcdMaxTxnOps) {
    std::vector<etcd::Op> ops;
    for (size_t i = at; i < std::min(keys.size(), at + kEtcdMaxTxnOps); ++i)
      ops.push_back(etcd::Op::put(etcd_key(keys[i]), values[i]));
    guarded("multi_set", keys[at], [&] {
      resend_while_indeterminate(Clock::now() + timeout_, [&](milliseconds t) { client_->txn({}, ops, {}, t); });
    });
  }
}

void EtcdStore::set_timeout(Duration timeout) {
  timeout_ = timeout;
  client_->set_timeout(timeout);
}

// The address the first member sees this host by, as the c10d store's
// connection tells it (net::address_toward answers both).
std::string EtcdStore::local_address() const {
  if (!local_address_.empty()) return local_address_;
  try {
    const EtcdEndpoint first =
        settings_.endpoints.empty() ? EtcdEndpoint{"127.0.0.1", etcd::kDefaultPort} : settings_.endpoints.front();
    local_address_ = net::address_toward(first.host, first.port);
  } catch (const std::exception& e) {
    throw store::StoreError(std::string("cannot find the address this host reaches etcd by: ") + e.what());
  }
  return local_address_;
}

}  // namespace cxxrun::rendezvous
