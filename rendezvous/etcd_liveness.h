// Liveness by leases, for the rendezvous over etcd (MemberLiveness,
// member_liveness.h). This node holds one lease with a TTL of
// keep_alive_interval * keep_alive_max_attempt (whole seconds, 3 s by
// default) and renews it every interval. Its alive key of each round hangs
// on that lease and is named as its join's marker is (etcd_roster.h): it is
// written in the join's own transaction, before the slot is known. When a
// node dies, etcd deletes its key as the lease expires, and every other
// member sees the DELETE on a watch of the round's alive keys, with the key
// as it was: its create revision is its join's, and the round's counter as
// of that revision is the slot (one read a death; a key created after the
// round's last member joined is a spare's, passed over). No member polls
// another's counter. The watch resumes on another member from the last
// revision seen (etcd/watch.h), so no DELETE is lost when a member fails.
//
// Called from the rendezvous's one thread. Its unary calls go over the
// algorithm's own client (EtcdStore's), which that thread already uses: a
// connection of its own would be one more descriptor per node on the etcd
// member, and 10,000 nodes at four or five each are more than one member
// may hold open by default. Its watch is its own stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/member_liveness.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::etcd {
class Client;
class Watch;
struct WatchEvent;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

class EtcdStore;
struct EtcdRoster;

class EtcdLiveness : public MemberLiveness {
 public:
  // `store` is borrowed (its client, its keys, the rounds' joiners), used
  // from the same thread, and outlives this.
  EtcdLiveness(const RendezvousSettings& settings, EtcdStore& store);
  ~EtcdLiveness() override;

  // The lease renewed first only where its last renewal may not outlast
  // the next beat; the alive key rides on the join's transaction.
  bool joining(const std::string& alive_prefix, store::StoreClient::Join& join) override;
  void took(const std::string& alive_key) override;
  // Deletes this node's alive key (best effort, a call's deadline).
  void spare() override;
  // "<revision>/<last member's join revision>[:<dead slot>,...]": the
  // members without an alive key, as of that revision; every member
  // watches from the revision after it.
  std::string snapshot(const std::string& alive_prefix, const std::string& counter, int members) override;
  void joined(const std::string& alive_prefix, const std::string& counter, int members,
              const std::string& snapshot) override;
  void beat() override;
  std::vector<int> dead_slots() override;
  // One count of the round's alive keys: the members' (spares drop theirs).
  int count_alive(const std::string& alive_prefix, int members) override;

  // Stops the watch on the others' leases: a node that is re-joining or
  // leaving has no use for their DELETEs. Its connection is kept for the
  // next round's watch (etcd::Watch::restart) unless `for_good`.
  void stop_watching(bool for_good = false);
  // Revokes the lease: the others see this node go at once, not a TTL
  // later. Best effort, bounded by one call's deadline.
  void release();

 private:
  void grant(std::chrono::milliseconds timeout);
  // A keep-alive of the lease, noting how long it holds; false where it
  // lapsed (or there is none).
  bool keep_alive(std::chrono::milliseconds timeout);
  // A keep-alive of the lease, or a new one where it lapsed.
  void renew(std::chrono::milliseconds timeout);
  // The lease's renewal holds for more than an interval and a half yet (by
  // this host's clock, from when the renewal was sent: etcd counts its TTL
  // from later).
  bool lease_holds() const;
  void rewatch(std::chrono::milliseconds timeout);
  // The watch of watched_ from `from` (0: from now), on the stopped watch's
  // connection where there is one. Throws as etcd::Watch's constructor.
  void open_watch(int64_t from, std::chrono::milliseconds timeout);
  // The history since resume_from_ is gone: a watch from now, then who is
  // alive read again.
  void resync(std::chrono::milliseconds timeout);
  // Slots of the first `members` joiners in `roster` without an alive key
  // under `prefix` (etcd's), and the revision they were read at.
  std::pair<int64_t, std::set<int>> read_dead(const EtcdRoster& roster, const std::string& prefix, int members,
                                              std::chrono::milliseconds timeout);
  // A watched event on an alive key: a member's death (or return) marked.
  // False where its slot could not be read yet (tried again next time).
  bool note(const etcd::WatchEvent& e);

  const EtcdSettings etcd_;
  const std::string key_prefix_;
  const int64_t ttl_seconds_;
  const std::chrono::milliseconds interval_;      // keep_alive_interval
  const std::chrono::milliseconds call_timeout_;  // a beat's
  const std::chrono::milliseconds read_timeout_;  // a step of the rendezvous (a join, a read of the dead)
  EtcdStore& store_;
  etcd::Client& client_;
  int64_t lease_ = 0;
  std::chrono::steady_clock::time_point holds_until_{};  // the last renewal's sending, plus its TTL
  std::string alive_key_;  // etcd's key, on the lease
  std::string watched_;    // etcd's prefix of the round's alive keys
  std::string counter_;    // the round's counter, the store's key
  int members_ = 0;
  int64_t last_member_ = 0;  // the revision of the last member's join: later keys are spares'
  std::map<std::string, int> slot_of_;  // alive key names seen to go, and their slots
  std::vector<etcd::WatchEvent> unread_;  // events whose slot could not be read yet
  int64_t resume_from_ = 0;
  std::unique_ptr<etcd::Watch> watch_;
  std::unique_ptr<etcd::Watch> stopped_;  // the last round's, stopped: its connection serves the next
  std::set<int> dead_;
};

}  // namespace cxxrun::rendezvous
