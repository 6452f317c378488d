// Who joined a round over etcd, and in which order (rendezvous/etcd_store.h,
// StoreClient::join). Each join is one transaction: the round's counter
// (its version is the count), the add's marker "<counter>/adds/<name>",
// whose value is the joiner's record (its descriptor), and its alive key
// (rendezvous/etcd_liveness.h). The markers are never deleted, and each was
// created in its add's transaction, so their create revisions order them as
// the counter's versions do: the i-th marker by create revision is slot i.
// A join is one write of etcd's where the add, then the descriptor and the
// alive key by slot, were two (bench/RESULTS.md, issue 45).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cxxrun::etcd {
class Client;
}

namespace cxxrun::rendezvous {

struct EtcdRoster {
  struct Joiner {
    std::string name;    // the marker's last part: the joiner's name
    std::string record;  // its descriptor
    int64_t created = 0;  // the revision of its add
  };
  std::string counter;          // etcd's key
  std::vector<Joiner> joiners;  // in slot order
  int64_t revision = 0;         // as of which they were read

  // Where the adds to etcd key `counter` leave their markers.
  static std::string marker_prefix(const std::string& counter) { return counter + "/adds/"; }
  // Every marker of `counter`, as pages of one snapshot (kPage keys each),
  // within `timeout`. Throws etcd's errors.
  static EtcdRoster read(etcd::Client& client, const std::string& counter, std::chrono::milliseconds timeout);
  // The slot of the joiner `name`, -1 if it is not among them.
  int slot_of(const std::string& name) const;
  // The revision of slot n-1's add: a key created after it is no member's
  // of a round of n (0 if fewer joined).
  int64_t last_member_created(int members) const;
};

}  // namespace cxxrun::rendezvous
