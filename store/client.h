// A client of a TCPStore-compatible server (ours or torch's). Used by agents
// for the rendezvous and by the worker runtime for bootstrap.
//
// Promises: every call has a deadline (Options::timeout unless given) and
// throws StoreTimeout when it passes; a broken connection is re-established
// with backoff within the same deadline (except for a call whose request was
// already sent and is not safe to repeat: then StoreError); keys are sent
// with Options::key_prefix (torch's client adds "/") so torch workers and
// cxxrun agents see the same key space.
//
// Not thread-safe: a client keeps one request outstanding on its one
// connection (or one batch: compare_sets, get_if_set_each) and nothing
// serialises callers; give each thread its own.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/client_errors.h"
#include "store/client_protocol.h"
#include "store/wire.h"

namespace cxxrun::store {

// What compare_set(key, expected, desired) answers without writing, given
// the key's value as just read (nullopt: absent): the value, unless it is
// `expected` or the key is absent with `expected` empty (then nullopt:
// compare_set would write); torch's quirk for an absent key and a
// non-empty `expected`. For a caller that read the key anyway and sends
// compare_set only where it may write: over etcd every compare_set that
// writes, even one whose comparison then fails, goes through Raft.
inline std::optional<std::string> compare_set_without_write(const std::optional<std::string>& now,
                                                            const std::string& expected) {
  if (now && (expected.empty() || *now != expected)) return now;
  if (!now && !expected.empty()) return expected;
  return std::nullopt;
}

class StoreClient {
 public:
  using Duration = std::chrono::milliseconds;

  struct Options {
    std::string host = "127.0.0.1";
    int port = wire::kDefaultPort;
    // Default deadline of each call, and of the initial connect.
    Duration timeout{std::chrono::seconds(300)};
    // modern: VALIDATE + PING handshake, torch >= 2.2 opcodes.
    // legacy: torch 1.13's opcodes, no handshake.
    Protocol protocol = Protocol::modern;
    std::string key_prefix = "/";
    // The server's shared secret (§9); empty: the server takes none. Each
    // connection proves it knows it before anything else.
    std::string token;
    // Shared by every client one owner makes (rendezvous/job_store.h), so
    // that the owner can give them all up at once, those still connecting
    // included: once set, each acts as after cancel(). Null: none.
    std::shared_ptr<const std::atomic<bool>> abandoned;
  };

  // Connects, retrying with exponential backoff until options.timeout.
  // Throws StoreTimeout naming host:port when the server never answers,
  // StoreAuthError at once when the token handshake fails, StoreError
  // within one backoff step once options.abandoned is set.
  static std::unique_ptr<StoreClient> connect(const Options& options);
  virtual ~StoreClient() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists (WAIT, then GET), like c10d's get.
  virtual std::string get(const std::string& key) = 0;
  virtual std::string get(const std::string& key, Duration timeout) = 0;
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // torch's semantics, quirk included: returns the value now stored (or
  // `expected` when the key is absent and expected is non-empty).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // The key's value if it exists, without waiting for it. Over a TCPStore
  // one COMPARE_SET that changes nothing (store/client.cc, kNeverStored);
  // this default, CHECK then GET, is for stores that answer a read of an
  // absent key in one request of their own.
  virtual std::optional<std::string> get_if_set(const std::string& key) {
    if (!check({key})) return std::nullopt;
    return get(key);
  }
  // Several COMPARE_SETs, each answered as compare_set would answer it, in
  // one round trip where the store can (a TCPStore: written together, the
  // answers read in order); this default makes them one at a time. For
  // requests none of which depends on another's answer: at 10,000 agents
  // the store's cost is its round trips (bench/RESULTS.md, issue 45).
  struct CompareSet {
    std::string key, expected, desired;
  };
  virtual std::vector<std::string> compare_sets(const std::vector<CompareSet>& each) {
    std::vector<std::string> out;
    out.reserve(each.size());
    for (const CompareSet& c : each) out.push_back(compare_set(c.key, c.expected, c.desired));
    return out;
  }
  // get_if_set of each key, in one round trip where the store can.
  virtual std::vector<std::optional<std::string>> get_if_set_each(const std::vector<std::string>& keys) {
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    for (const std::string& key : keys) out.push_back(get_if_set(key));
    return out;
  }
  // add(counter, delta), then get_if_set of each key, in one round trip
  // where the store can. A counter is read by add(counter, 0), never by its
  // value: over etcd its count is the key's version (rendezvous/etcd_store.h).
  struct CountAndValues {
    int64_t count = 0;
    std::vector<std::optional<std::string>> values;
  };
  virtual CountAndValues add_and_get_if_set_each(const std::string& counter, int64_t delta,
                                                 const std::vector<std::string>& keys) {
    CountAndValues out;
    out.count = add(counter, delta);
    out.values = get_if_set_each(keys);
    return out;
  }
  // add(counter, 1), and compare_set of `also` with it, in one request
  // where the store can (a TCPStore: one round trip; etcd: a transaction
  // inside the add's): a joiner that found the round not yet opened opens
  // it with its join, where every such member sent a compare_set of its own
  // (over etcd, a write through Raft each). Returns the count; `also`'s
  // answer is not waited for where the store sends them together.
  virtual int64_t add_and_compare_set(const std::string& counter, const CompareSet& also) {
    const int64_t count = add(counter, 1);
    compare_set(also.key, also.expected, also.desired);
    return count;
  }
  // What add_if_unchanged checks: `counter` still counts `count` (as
  // add(counter, 0) reads it) and each of `expected` still holds its value
  // (nullopt: absent); `reads` are only read, for where it does not.
  struct Unchanged {
    std::string counter;
    int64_t count = 0;
    std::vector<std::pair<std::string, std::optional<std::string>>> expected;
    std::vector<std::string> reads;
  };
  // add_if_unchanged's answer: the add's count, or (none) what was read:
  // the counter's count, and the values of `expected`'s keys, then of
  // `reads`, as add_and_get_if_set_each reads them.
  struct AddedOrRead {
    std::optional<int64_t> count;
    CountAndValues read;
  };
  // add_and_compare_set(counter, also), made only while `unchanged` holds;
  // where it does not, nothing is written. One request where the store can
  // (etcd: one transaction, whose compares are the check): a re-joining
  // member whose round changed only by deaths reads nothing before it
  // joins. Elsewhere the read, then the add, as two requests.
  virtual AddedOrRead add_if_unchanged(const std::string& counter, const CompareSet& also, const Unchanged& unchanged) {
    std::vector<std::string> keys;
    for (const auto& e : unchanged.expected) keys.push_back(e.first);
    keys.insert(keys.end(), unchanged.reads.begin(), unchanged.reads.end());
    AddedOrRead out;
    out.read = add_and_get_if_set_each(unchanged.counter, 0, keys);
    if (out.read.count != unchanged.count) return out;
    for (size_t i = 0; i < unchanged.expected.size(); ++i)
      if (out.read.values.at(i) != unchanged.expected[i].second) return out;
    // `also` read not as expected: its compare_set would write nothing.
    const auto at = std::find(keys.begin(), keys.end(), also.key);
    const bool moot = at != keys.end() && compare_set_without_write(out.read.values.at(at - keys.begin()), also.expected);
    out.count = moot ? add(counter, 1) : add_and_compare_set(counter, also);
    return out;
  }
  // A node joining a round: add(counter, 1), with `open` as
  // add_and_compare_set's and only while `unchanged` holds as
  // add_if_unchanged's (each where given), that leaves `record` as what
  // joiner count-1 says of itself: joiners() reads them back in the order
  // of their adds. Where the store can, one write (etcd: the record is the
  // value of the add's marker, and a key `alive_prefix` + the joiner's name
  // on `lease` rides in the same transaction; bench/RESULTS.md, issue 45).
  // Here the add, then set(record_prefix + "<slot>", record): the lease is
  // the store's business, and this one keeps none.
  struct Join {
    std::string counter;
    std::optional<CompareSet> open;
    std::optional<Unchanged> unchanged;  // only with `open`
    std::string record_prefix, record;
    std::string alive_prefix;
    int64_t lease = 0;
    // Where the store refuses `lease` as gone (revoked, or its TTL ran out
    // by the store's clock): a new one, to send the join again with.
    std::function<int64_t()> lease_gone;
  };
  // The add's answer (as add_if_unchanged's), and the name this store gave
  // the joiner: its alive key is alive_prefix + name (here its slot).
  struct Joined {
    AddedOrRead added;
    std::string name;
  };
  virtual Joined join(const Join& j) {
    Joined out;
    out.added = add_of(j);
    if (!out.added.count) return out;
    out.name = std::to_string(*out.added.count - 1);
    set(j.record_prefix + out.name, j.record);
    return out;
  }
  // The records of the first `n` joiners of `counter` (join), in the order
  // they joined. With `wait`, waited for up to that long where the store
  // writes them after the add (here: wait_and_get of record_prefix +
  // "0".."n-1"); without, the round is known assigned (here: multi_get).
  virtual std::vector<std::string> joiners(const std::string& counter, const std::string& record_prefix, int n,
                                           std::optional<Duration> wait) {
    (void)counter;
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back(record_prefix + std::to_string(i));
    return wait ? wait_and_get(keys, *wait) : multi_get(keys);
  }
  // compare_set(first), and set(key, value) whatever it answers, in one
  // write where the store can (etcd: one transaction, so a watch of both
  // keys gets both in one message; a round's completion and the wake-up it
  // owes the waiters reached every agent's watch as two pushes of N).
  // Returns compare_set's answer.
  virtual std::string compare_set_and_set(const CompareSet& first, const std::string& key, const std::string& value) {
    std::string answer = compare_set(first.key, first.expected, first.desired);
    set(key, value);
    return answer;
  }
  // Blocks until every key exists; throws StoreTimeout after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout) = 0;
  // wait(keys, timeout), then every key's value, in one pass where the
  // store can (over etcd the values come with the wait's read and its
  // watch's events; a WAIT and a MULTI_GET read every key twice, a round's
  // assigner's N descriptors).
  virtual std::vector<std::string> wait_and_get(const std::vector<std::string>& keys, Duration timeout) {
    wait(keys, timeout);
    return multi_get(keys);
  }
  virtual int64_t num_keys() = 0;
  virtual bool delete_key(const std::string& key) = 0;
  // modern only (throws StoreError on a legacy connection):
  virtual void append(const std::string& key, const std::string& value) = 0;
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) = 0;

  // Changes the default deadline of later calls (Options::timeout).
  virtual void set_timeout(Duration timeout) = 0;

  // Keys starting with `prefix` are each written once (or rarely) and waited
  // for by every member: a round's milestones (rendezvous/c10d_rendezvous.h).
  // A store whose every wait costs a watch of its own (etcd: a stream through
  // its gateway) may serve waits and reads of them from one watch on the
  // prefix, kept for the client's life (rendezvous/etcd_store.h). A TCPStore
  // WAIT costs one request either way: it ignores this.
  virtual void expect_waits_under(const std::string& prefix) { (void)prefix; }
  // No milestone of `group` (a prefix under expect_waits_under's: a
  // round's) is written before `after` first was: a counter this client
  // has just added to (its first add). A store whose one watch began
  // before that then knows the watch brings every milestone of the group,
  // and reads none of them (over etcd, a request per member per round).
  virtual void milestones_follow(const std::string& group, const std::string& after) {
    (void)group;
    (void)after;
  }

  // Ends the reconnecting of a call in flight within one backoff step (at
  // most a second and a half: net/backoff.h's cap with its jitter), and makes every later reconnect fail at once
  // (StoreError): for an owner that is leaving because the store is gone and
  // must not wait out the call's deadline (Options::abandoned does the
  // same for every client of an owner). Any thread; a client that never
  // reconnects ignores it.
  virtual void cancel() {}

  // The local IP address of this connection: the address the server sees us
  // by, which is how other nodes can reach this one (MASTER_ADDR). Numeric,
  // never a hostname; that of the last connection while none is open.
  virtual std::string local_address() const = 0;

 protected:
  // A join's add alone: add_if_unchanged, add_and_compare_set or add, as
  // its `open` and `unchanged` say.
  AddedOrRead add_of(const Join& j) {
    AddedOrRead out;
    if (j.open && j.unchanged) out = add_if_unchanged(j.counter, *j.open, *j.unchanged);
    else out.count = j.open ? add_and_compare_set(j.counter, *j.open) : add(j.counter, 1);
    return out;
  }
};

}  // namespace cxxrun::store
