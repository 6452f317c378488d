#include "rendezvous/etcd_reads.h"

#include <algorithm>
#include <map>

#include "etcd/client.h"
#include "etcd/types.h"

namespace cxxrun::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Keys a page of a range holds: 10,000 descriptors are 5 answers of about
// 300 KB, well inside what etcd's gateway relays.
constexpr int64_t kRangePage = 2048;

}  // namespace

std::string common_prefix(const std::string& a, const std::string& b) {
  return a.substr(0, std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// Every page after the first is read at the first's revision: one snapshot,
// as one txn would be.
int64_t read_etcd_prefix(etcd::Client& client, const std::string& prefix, milliseconds timeout,
                         const std::function<void(etcd::KeyValue&)>& each) {
  const auto deadline = Clock::now() + timeout;
  const std::string end = etcd::Op::get_prefix(prefix).range_end;
  int64_t revision = 0;
  std::string from = prefix;
  for (bool more = true; more;) {
    const auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    auto page = client.range_page(from, end, kRangePage, revision, left);
    if (revision == 0) revision = page.revision;
    for (auto& kv : page.kvs) each(kv);
    more = page.more && !page.kvs.empty();
    if (more) from = page.kvs.back().key + '\0';
  }
  return revision;
}

EtcdReads read_etcd_keys(etcd::Client& client, const std::vector<std::string>& keys, milliseconds timeout) {
  EtcdReads got;
  if (keys.size() > kEtcdMaxTxnOps) {
    const auto [low, high] = std::minmax_element(keys.begin(), keys.end());
    if (const std::string common = common_prefix(*low, *high); !common.empty()) {
      // Keys of the range not asked for are passed over.
      std::map<std::string, std::vector<size_t>> wanted;  // key -> its places in `keys`
      for (size_t i = 0; i < keys.size(); ++i) wanted[keys[i]].push_back(i);
      got.values.resize(keys.size());
      got.revision = read_etcd_prefix(client, common, timeout, [&](etcd::KeyValue& kv) {
        if (auto it = wanted.find(kv.key); it != wanted.end())
          for (size_t i : it->second) got.values[i] = kv.value;
      });
      return got;
    }
  }
  for (size_t at = 0; at < keys.size(); at += kEtcdMaxTxnOps) {
    std::vector<etcd::Op> ops;
    for (size_t i = at; i < std::min(keys.size(), at + kEtcdMaxTxnOps); ++i) ops.push_back(etcd::Op::get(keys[i]));
    auto r = client.txn({}, ops, {}, timeout);
    if (got.revision == 0) got.revision = r.revision;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i < r.responses.size() && !r.responses[i].kvs.empty()) got.values.push_back(r.responses[i].kvs.front().value);
      else got.values.emplace_back();
    }
  }
  return got;
}

}  // namespace cxxrun::rendezvous
