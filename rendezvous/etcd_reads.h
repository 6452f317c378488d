// Reading many keys of etcd as one snapshot (rendezvous/etcd_store.h): a
// round's assigner reads every member's descriptor, and its group rank 0
// every member's address, N keys under one prefix. A txn holds 128 reads
// (etcd's --max-txn-ops), so 10,000 were 79 transactions one after another
// while every member waited; pages of the prefix's range are 5.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::etcd {
class Client;
struct KeyValue;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

// etcd's default --max-txn-ops: the most operations one transaction holds.
inline constexpr size_t kEtcdMaxTxnOps = 128;

struct EtcdReads {
  std::vector<std::optional<std::string>> values;  // none: absent
  int64_t revision = 0;  // as of which they were read: a watch from after it misses nothing
};

// The longest prefix `a` and `b` share: of a sorted set's first and last
// keys, the prefix every key of it shares.
std::string common_prefix(const std::string& a, const std::string& b);

// Each of `keys` (etcd's): more than one txn holds, under a common prefix,
// as pages of that prefix's range; others in txns of 128. Throws etcd's
// errors; `timeout` bounds each request.
EtcdReads read_etcd_keys(etcd::Client& client, const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

// Every key under etcd `prefix`, as pages of one snapshot (a page at a
// time to `each`), within `timeout` in all; returns the snapshot's revision.
int64_t read_etcd_prefix(etcd::Client& client, const std::string& prefix, std::chrono::milliseconds timeout,
                         const std::function<void(etcd::KeyValue&)>& each);

}  // namespace cxxrun::rendezvous
