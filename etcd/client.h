// A client of etcd's v3 API over gRPC (HTTP/2, plain or TLS), for the etcd
// rendezvous backend. docs/etcd-client.md has the wire details and the
// reasons.
//
// Promises: every call has a deadline (Options::timeout unless given) and
// throws EtcdTimeout once it passes, or EtcdUnavailable when no member could
// be reached at all; a call fails over from member to member within that
// deadline as transport.h describes (reads always; writes only while they
// have not reached a member). A write that fails with EtcdTimeout or
// EtcdIndeterminate may or may not have been applied (errors.h): re-read
// before deciding. Nothing but the errors.h classes is thrown.
//
// Not thread-safe: a client keeps one request on one connection at a time
// and nothing serialises callers; give each thread its own (a Watch is an
// object of its own, with its own connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etcd/errors.h"
#include "etcd/options.h"
#include "etcd/types.h"

namespace cxxrun::etcd {

class Transport;

class Client {
 public:
  using Duration = std::chrono::milliseconds;
  // A call's timeout argument: zero means Options::timeout.
  static constexpr Duration kDefault{0};

  // Checks the options (endpoints, TLS files, credentials in pairs) and
  // loads the TLS files; connects lazily, on the first call. Throws
  // EtcdError, EtcdTlsError or EtcdAuthError naming what is wrong.
  explicit Client(const Options& options);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  // One key: its KeyValue if it exists, and the store's revision.
  GetResult range(const std::string& key, Duration timeout = kDefault);
  // The key as it was at `revision`; EtcdRequestError once etcd compacted it.
  GetResult range_at(const std::string& key, int64_t revision, Duration timeout = kDefault);
  // Every key starting with `prefix` ("" for every key), sorted by key.
  RangeResult range_prefix(const std::string& prefix, Duration timeout = kDefault);
  // The keys in [key, range_end): how many, or which (values left out), so
  // that a large range costs a small answer.
  CountResult count(const std::string& key, const std::string& range_end, Duration timeout = kDefault);
  RangeResult range_keys(const std::string& key, const std::string& range_end, Duration timeout = kDefault);
  // At most `limit` keys of [key, range_end), with values, as of `revision`
  // (0: now); `more` says keys remain after the last one. Pages read at the
  // first page's revision are one snapshot of a range too large for one
  // answer; EtcdRequestError once etcd compacted that revision.
  RangeResult range_page(const std::string& key, const std::string& range_end, int64_t limit, int64_t revision,
                         Duration timeout = kDefault);

  // Returns the revision of the write. lease 0: none.
  int64_t put(const std::string& key, const std::string& value, int64_t lease = 0, Duration timeout = kDefault);

  // Return how many keys were deleted.
  int64_t delete_range(const std::string& key, Duration timeout = kDefault);
  int64_t delete_prefix(const std::string& prefix, Duration timeout = kDefault);

  // If every compare holds, runs `success`, else `failure`, atomically.
  TxnResult txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                const std::vector<Op>& failure = {}, Duration timeout = kDefault);

  // A lease of at least ttl_seconds (etcd may raise a small one).
  Lease lease_grant(int64_t ttl_seconds, Duration timeout = kDefault);
  // Renews the lease; returns its TTL again, 0 when the lease is gone
  // (expired or revoked: its keys are deleted).
  int64_t lease_keep_alive(int64_t id, Duration timeout = kDefault);
  // Revokes the lease and deletes its keys; false when there was no such
  // lease (including one this call revoked on a try whose answer was lost).
  bool lease_revoke(int64_t id, Duration timeout = kDefault);

  // The member the next request goes to, "host:port".
  std::string endpoint() const;
  // Changes Options::timeout for later calls.
  void set_timeout(Duration timeout);

 private:
  std::unique_ptr<Transport> transport_;
};

}  // namespace cxxrun::etcd
