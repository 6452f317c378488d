// The store primitives the rendezvous algorithm runs on (store::StoreClient),
// over an etcd v3 cluster instead of a TCPStore, so c10d_rendezvous.h is the
// one algorithm for both (docs/etcd.md).
//
// How each primitive maps onto etcd, one request unless said:
//   set, multi_set      put; a txn of puts (128 per txn, etcd's limit)
//   get, check, multi_get  range; a txn of ranges (128 per txn)
//   compare_set         a range first; only if the key is as expected
//                       (absent, or the expected value) a txn: compare the
//                       value (absent: create_revision 0), put on success,
//                       read back on failure. Every writer but the first
//                       reads instead of proposing a write
//   get                 a range; an absent key is waited for as below, and
//                       its value comes with the watch's event
//   get_if_set          a range; get_if_set_each a txn of ranges
//   compare_sets        one txn of ranges (read-only: answered without
//                       Raft), then compare_set's txn only for a key found
//                       as expected
//   compare_set_and_set one txn: the compare, the put where it holds, a
//                       read where not, and the other key's put either way
//   add_and_get_if_set_each(k, 0, keys)  one txn of ranges: k's version
//                       and the keys
//   add_and_compare_set the add's txn with compare_set's inside it (a
//                       nested txn, etcd 3.3 on)
//   add_if_unchanged    add_and_compare_set's txn, its compares holding the
//                       check too (the counter's version, each value or
//                       absence), and reading the keys where they fail
//   join                add(k, 1) (or add_and_compare_set,
//                       add_if_unchanged) whose marker holds the joiner's
//                       record, with its alive key on the lease (named as
//                       the marker) in the same txn: one write a joiner;
//                       joiners reads the markers back, by create revision
//                       (rendezvous/etcd_roster.h)
//   add(k, 1)           a txn of [put k, range k, put k's marker of this
//                       add] if the marker is absent: the key's version is
//                       the count, so concurrent adds never retry. An add
//                       etcd may or may not have applied (it answered
//                       "request timed out") is sent again: if the first
//                       applied, the marker is there and the count is read
//                       as of its revision, so an add counts once however
//                       often it is sent. add(k, 0) reads the count. Other
//                       deltas are refused: the algorithm counts by one,
//                       and the version cannot count by more
//   append              a compare-and-swap loop on mod_revision; an append
//                       etcd may or may not have applied is read back
//   wait                a range, then a watch from the revision after it, so
//                       a key written in between is never missed; until the
//                       key is written the watch stays open for the next
//                       wait on it, which then reads nothing (the round
//                       watcher's slices cost no request). Several keys are
//                       read in txns of 128, and the absent ones waited for
//                       with one watch on their common prefix
// Milestones (expect_waits_under): a get, a wait or a get_if_set of a key
// under that prefix is answered from one watch on the whole prefix
// (rendezvous/etcd_milestones.h); milestones_follow tells it a round that
// began after the watch.
// A put, a txn of puts, a compare_set's txn and an add etcd may or may not
// have applied ("request timed out") are sent again until the store's
// timeout (resend_while_indeterminate below).
// Keys are `etcd_prefix` + "/" + the algorithm's key. A counter's value is
// empty: read it with add(k, 0), never get().
//
// Errors are the store's: StoreTimeout when a deadline passes, StoreError for
// anything else, each one line naming etcd's members.
//
// Not thread-safe, like every StoreClient: one per thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/etcd_calls.h"
#include "rendezvous/etcd_reads.h"
#include "rendezvous/rendezvous.h"
#include "store/client.h"

namespace cxxrun::etcd {
class Client;
class Watch;
struct Compare;
struct KeyValue;
struct Op;
struct OpResult;
struct Options;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

class EtcdKeyWait;
class EtcdMilestones;
struct EtcdRoster;


class EtcdStore : public store::StoreClient {
 public:
  EtcdStore(const EtcdSettings& settings, Duration timeout);
  ~EtcdStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::string get(const std::string& key, Duration timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  std::optional<std::string> get_if_set(const std::string& key) override;
  // One txn of ranges, as multi_get's.
  std::vector<std::optional<std::string>> get_if_set_each(const std::vector<std::string>& keys) override;
  // One transaction of ranges, then a write only where needed.
  std::vector<std::string> compare_sets(const std::vector<CompareSet>& each) override;
  // One transaction: the compare, the put where it holds, and the set either
  // way. No read first: one writer completes a round, not many.
  std::string compare_set_and_set(const CompareSet& first, const std::string& key, const std::string& value) override;
  // The compare_set as a transaction inside the add's.
  int64_t add_and_compare_set(const std::string& counter, const CompareSet& also) override;
  // One transaction: the check is its compares.
  AddedOrRead add_if_unchanged(const std::string& counter, const CompareSet& also, const Unchanged& unchanged) override;
  // One transaction: the add (as add, add_and_compare_set or
  // add_if_unchanged), its marker holding the record, and the alive key on
  // the lease (rendezvous/etcd_roster.h).
  Joined join(const Join& j) override;
  // The markers of `counter`, by create revision: one read, never a wait.
  std::vector<std::string> joiners(const std::string& counter, const std::string& record_prefix, int n,
                                   std::optional<Duration> wait) override;
  // Who joined `counter`'s round, in slot order: the last read (joiners()'s)
  // where it holds at least `members`, else read again.
  const EtcdRoster& roster(const std::string& counter, int members);
  // With delta 0: the count and the keys in one transaction of ranges.
  CountAndValues add_and_get_if_set_each(const std::string& counter, int64_t delta,
                                         const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  // The wait's read and its watch's events bring the values: one pass.
  std::vector<std::string> wait_and_get(const std::vector<std::string>& keys, Duration timeout) override;
  int64_t num_keys() override;
  bool delete_key(const std::string& key) override;
  void append(const std::string& key, const std::string& value) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override;
  void set_timeout(Duration timeout) override;
  void expect_waits_under(const std::string& prefix) override;
  // By the counter's create revision, as this store's last add read it, or
  // the milestone's revision, as it came.
  void milestones_follow(const std::string& group, const std::string& after) override;
  // The address this host reaches the first member from (a routing lookup:
  // a UDP socket connected there, nothing sent).
  std::string local_address() const override;

  // The etcd key behind one of the algorithm's keys.
  std::string etcd_key(const std::string& key) const { return prefix_ + key; }
  etcd::Client& client() { return *client_; }

 private:
  // Runs `call`, turning etcd's errors into the store's.
  template <typename F>
  auto guarded(const char* what, const std::string& key, F&& call);
  void wait_one(const std::string& key, std::chrono::steady_clock::time_point deadline);
  // add(key, 1), with `with` in the same transaction, made only while
  // `check` holds; none where it did not (nothing written), and then the
  // answers to `reads` in *read_back.
  std::optional<int64_t> add_one(const std::string& key, std::vector<etcd::Op> with,
                                 std::vector<etcd::Compare> check = {}, std::vector<etcd::Op> reads = {},
                                 std::vector<etcd::OpResult>* read_back = nullptr);
  // compare_set given the key's value as just read (nullopt: absent).
  std::string compare_set_after(const std::string& key, const std::string& expected, const std::string& desired,
                                const std::optional<std::string>& now);
  // compare_set's transaction, with `also` on both of its branches.
  std::string compare_set_txn(const std::string& key, const std::string& expected, const std::string& desired,
                              const std::vector<etcd::Op>& also);
  // Each key's value (nullopt: absent), one snapshot, and its revision: a
  // watch from after it misses nothing (rendezvous/etcd_reads.h).
  EtcdReads read_many(const char* what, const std::vector<std::string>& keys);
  const EtcdSettings settings_;
  const std::string prefix_;
  Duration timeout_;
  std::unique_ptr<etcd::Client> client_;
  // Waits for a key that is not a milestone, with the watch of the last
  // one, kept while waits are on the same key.
  std::unique_ptr<EtcdKeyWait> key_wait_;
  std::unique_ptr<EtcdMilestones> milestones_;
  mutable std::string local_address_;
  // Names this store's adds apart from every other's (the pid and a random
  // number), and a count of them.
  const std::string adder_;
  int64_t adds_ = 0;
  // The join whose add is under way (join()), and the name its add gave it.
  const Join* joining_ = nullptr;
  std::string joined_name_;
  std::unique_ptr<EtcdRoster> roster_;
  // The counter of the last add, and its create revision (its first add's).
  std::string added_;
  int64_t added_created_ = 0;
};

}  // namespace cxxrun::rendezvous
