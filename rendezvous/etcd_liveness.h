// Liveness by leases, for the rendezvous over etcd (MemberLiveness,
// member_liveness.h). This node holds one lease with a TTL of
// keep_alive_interval * keep_alive_max_attempt (whole seconds, 3 s by
// default) and renews it every interval; its alive key of each round hangs
// on that lease, its slot zero-padded so that the keys of slots 0..n-1 are
// one range that etcd can count. When a node dies, etcd deletes its key as the lease
// expires, and every other member sees the DELETE on a watch of the round's
// alive keys: no member polls another's counter. The watch resumes on
// another member from the last revision seen (etcd/watch.h), so no DELETE
// is lost when a member fails.
//
// Called from the rendezvous's one thread. Its unary calls go over the
// algorithm's own client (EtcdStore's), which that thread already uses: a
// connection of its own would be one more descriptor per node on the etcd
// member, and 10,000 nodes at four or five each are more than one member
// may hold open by default. Its watch is its own stream.
#pragma once

#include <chrono>
#include <cstdint>
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
struct CountResult;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

class EtcdLiveness : public MemberLiveness {
 public:
  // `key_prefix` turns the algorithm's keys into etcd's (EtcdStore::etcd_key).
  // `client` is borrowed, used from the same thread, and outlives this.
  EtcdLiveness(const RendezvousSettings& settings, etcd::Client& client, std::string key_prefix);
  ~EtcdLiveness() override;

  // The alive key and the descriptor in one transaction; the lease renewed
  // first only where its last renewal may not outlast the next beat.
  bool joining(const std::string& alive_prefix, int slot, const std::string& descriptor_key,
               const std::string& descriptor) override;
  // "<revision>[:<dead slot>,...]": the slots without an alive key, as of
  // that revision; every member watches from the revision after it.
  std::string snapshot(const std::string& alive_prefix, int members) override;
  void joined(const std::string& alive_prefix, int members, const std::string& snapshot) override;
  void beat() override;
  std::vector<int> dead_slots() override;
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
  // How many of slots 0..members-1 under `prefix` (etcd's) have an alive
  // key: one small answer, however many they are.
  etcd::CountResult count_slots(const std::string& prefix, int members, std::chrono::milliseconds timeout);
  // Slots of 0..members-1 under `prefix` (etcd's) without an alive key, and
  // the revision they were read at: a count, and the keys only if some are
  // missing (a round of N costs one small answer, not N keys).
  std::pair<int64_t, std::set<int>> read_dead(const std::string& prefix, int members,
                                              std::chrono::milliseconds timeout);
  // etcd's key of `slot` under the round's prefix.
  std::string slot_key(const std::string& round_prefix, int slot) const;

  const EtcdSettings etcd_;
  const std::string key_prefix_;
  const int64_t ttl_seconds_;
  const std::chrono::milliseconds interval_;      // keep_alive_interval
  const std::chrono::milliseconds call_timeout_;  // a beat's
  const std::chrono::milliseconds read_timeout_;  // a step of the rendezvous (a join, a read of the dead)
  etcd::Client& client_;
  int64_t lease_ = 0;
  std::chrono::steady_clock::time_point holds_until_{};  // the last renewal's sending, plus its TTL
  std::string alive_key_;  // etcd's key, on the lease
  std::string watched_;    // etcd's prefix of the round's alive keys
  int members_ = 0;
  int64_t resume_from_ = 0;
  std::unique_ptr<etcd::Watch> watch_;
  std::unique_ptr<etcd::Watch> stopped_;  // the last round's, stopped: its connection serves the next
  std::set<int> dead_;
};

}  // namespace cxxrun::rendezvous
