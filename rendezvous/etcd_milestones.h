// An EtcdStore's milestones (StoreClient::expect_waits_under): the keys
// under one prefix, each written once (or rarely), that every member of a
// job waits for, served from one watch on the whole prefix, made at the
// first such key found absent and kept for the store's life, and from what
// it delivered. A milestone it delivered costs no request; one read absent
// is not read again (its put comes on the watch). A milestone not yet known
// is read with its group (the keys sharing its first segment under the
// prefix: a round's; for a key right under it, the prefix's), one range for
// them all, unless the group is known to
// have begun after the watch did (follow): then the watch brings all of it.
// Without this every wait was a watch of its own, a stream through etcd's
// gateway, and each agent opened about five per re-join; a job's
// milestones are a few keys a round, so every agent receiving all of them
// is cheap.
//
// Keys here are etcd's (the store's prefix included). Errors are the
// store's (rendezvous/etcd_errors.h). Used from the store's one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "etcd/options.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::etcd {
class Client;
class Watch;
struct KeyValue;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

class EtcdMilestones {
 public:
  using Clock = std::chrono::steady_clock;

  // `client` is the store's, borrowed; it outlives this. `watch` is how
  // the watch reaches etcd (etcd_options, rendezvous/etcd_store.h).
  EtcdMilestones(const EtcdSettings& settings, etcd::Client& client, etcd::Options watch);
  ~EtcdMilestones();

  // The milestones are the keys under `prefix` (empty: none). A new prefix
  // forgets what the old one's watch brought.
  void expect_under(const std::string& prefix);
  bool covers(const std::string& key) const;
  // The milestone's value once it is written, waiting until `deadline`
  // (nullopt then); `wait` false: only what is known or read now. The
  // watch, if this makes it, keeps `watch_timeout` to be made again after
  // a member fails. `what` and `named` (the store's own name of the key)
  // are for messages.
  std::optional<std::string> value(const std::string& what, const std::string& named, const std::string& key,
                                   Clock::time_point deadline, bool wait, std::chrono::milliseconds watch_timeout);
  // No milestone of `group` was written before revision `from` (its first
  // writer's own write came at or after it): when the watch began no later,
  // it brings every one of them, and the group is never read.
  void follow(const std::string& group, int64_t from);

 private:
  // Takes in what the watch delivered, waiting until the deadline for
  // something; false when nothing came.
  bool take(Clock::time_point deadline);
  void forget();
  // Keeps a milestone's value unless a later one is already known.
  void remember(etcd::KeyValue& kv);
  struct Seen {
    std::string value;
    int64_t revision = 0;
  };

  const EtcdSettings settings_;
  etcd::Client& client_;
  const etcd::Options watch_options_;
  std::string prefix_;
  std::unique_ptr<etcd::Watch> watch_;
  int64_t from_ = 0;                   // the watch's start revision
  std::map<std::string, Seen> seen_;   // milestones written
  std::set<std::string> read_groups_;  // groups read while it ran: what they lack comes on it
};

}  // namespace cxxrun::rendezvous
