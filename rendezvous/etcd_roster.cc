#include "rendezvous/etcd_roster.h"

#include <algorithm>

#include "etcd/client.h"
#include "etcd/types.h"
#include "rendezvous/etcd_reads.h"

namespace cxxrun::rendezvous {

EtcdRoster EtcdRoster::read(etcd::Client& client, const std::string& counter, std::chrono::milliseconds timeout) {
  EtcdRoster out;
  out.counter = counter;
  const std::string prefix = marker_prefix(counter);
  out.revision = read_etcd_prefix(client, prefix, timeout, [&](etcd::KeyValue& kv) {
    out.joiners.push_back(Joiner{kv.key.substr(prefix.size()), std::move(kv.value), kv.create_revision});
  });
  std::sort(out.joiners.begin(), out.joiners.end(),
            [](const Joiner& a, const Joiner& b) { return a.created < b.created; });
  return out;
}

int EtcdRoster::slot_of(const std::string& name) const {
  for (size_t i = 0; i < joiners.size(); ++i)
    if (joiners[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t EtcdRoster::last_member_created(int members) const {
  if (members <= 0 || static_cast<size_t>(members) > joiners.size()) return 0;
  return joiners[members - 1].created;
}

}  // namespace cxxrun::rendezvous
