// Client: each call is one gRPC call through Transport; this file knows
// which method each operation uses and which may be sent twice.
#include "etcd/client.h"

#include "etcd/transport.h"
#include "etcd/wire.h"

namespace cxxrun::etcd {
namespace {

using Repeat = Transport::Repeat;

constexpr char kRange[] = "/etcdserverpb.KV/Range";
constexpr char kPut[] = "/etcdserverpb.KV/Put";
constexpr char kDeleteRange[] = "/etcdserverpb.KV/DeleteRange";
constexpr char kTxn[] = "/etcdserverpb.KV/Txn";
constexpr char kLeaseGrant[] = "/etcdserverpb.Lease/LeaseGrant";
// A stream in gRPC: one request, its one answer, and the end of the call.
constexpr char kLeaseKeepAlive[] = "/etcdserverpb.Lease/LeaseKeepAlive";
constexpr char kLeaseRevoke[] = "/etcdserverpb.Lease/LeaseRevoke";

Clock::time_point deadline_of(const Transport& transport, Client::Duration timeout) {
  return Clock::now() + (timeout > Client::Duration::zero() ? timeout : transport.options().timeout);
}

// A call and the parse of its answer; an answer that does not parse names
// the member that sent it.
template <class Parse>
auto exchange(Transport& transport, std::string_view what, const char* method, const std::string& body, Repeat repeat,
              Client::Duration timeout, Parse parse) {
  std::string answer = transport.call(what, method, body, repeat, deadline_of(transport, timeout));
  try {
    return parse(answer);
  } catch (const wire::Malformed& e) {
    throw EtcdError("etcd " + transport.current().text() + ": " + std::string(what) + ": " + e.what());
  }
}

}  // namespace

Client::Client(const Options& options) : transport_(std::make_unique<Transport>(options)) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

GetResult Client::range(const std::string& key, Duration timeout) {
  return exchange(*transport_, "range", kRange, wire::range_request(key, ""), Repeat::always, timeout,
                  wire::parse_get);
}

GetResult Client::range_at(const std::string& key, int64_t revision, Duration timeout) {
  return exchange(*transport_, "range", kRange, wire::range_at_request(key, revision), Repeat::always,
                  timeout, wire::parse_get);
}

RangeResult Client::range_prefix(const std::string& prefix, Duration timeout) {
  Op op = Op::get_prefix(prefix);
  return exchange(*transport_, "range", kRange, wire::range_request(op.key, op.range_end), Repeat::always,
                  timeout, wire::parse_range);
}

CountResult Client::count(const std::string& key, const std::string& range_end, Duration timeout) {
  return exchange(*transport_, "range", kRange, wire::range_request(key, range_end, wire::RangeShape::count_only),
                  Repeat::always, timeout, wire::parse_count);
}

RangeResult Client::range_keys(const std::string& key, const std::string& range_end, Duration timeout) {
  return exchange(*transport_, "range", kRange, wire::range_request(key, range_end, wire::RangeShape::keys_only),
                  Repeat::always, timeout, wire::parse_range);
}

RangeResult Client::range_page(const std::string& key, const std::string& range_end, int64_t limit, int64_t revision,
                               Duration timeout) {
  return exchange(*transport_, "range", kRange, wire::range_page_request(key, range_end, limit, revision),
                  Repeat::always, timeout, wire::parse_range);
}

int64_t Client::put(const std::string& key, const std::string& value, int64_t lease, Duration timeout) {
  // Sent twice, a put would write twice (two revisions), and a caller that
  // compares mod_revision would see a write it did not expect.
  return exchange(*transport_, "put", kPut, wire::put_request(key, value, lease), Repeat::unsent, timeout,
                  wire::parse_revision);
}

int64_t Client::delete_range(const std::string& key, Duration timeout) {
  // A repeat would count 0 deleted for keys the first try deleted.
  return exchange(*transport_, "delete", kDeleteRange, wire::delete_request(key, ""), Repeat::unsent,
                  timeout, wire::parse_deleted);
}

int64_t Client::delete_prefix(const std::string& prefix, Duration timeout) {
  Op op = Op::del_prefix(prefix);
  return exchange(*transport_, "delete", kDeleteRange, wire::delete_request(op.key, op.range_end),
                  Repeat::unsent, timeout, wire::parse_deleted);
}

TxnResult Client::txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                      const std::vector<Op>& failure, Duration timeout) {
  // A compare-and-set that succeeded, sent again, fails its compare against
  // its own write: the caller would be told it lost.
  return exchange(*transport_, "txn", kTxn, wire::txn_request(compares, success, failure), Repeat::unsent,
                  timeout, wire::parse_txn);
}

Lease Client::lease_grant(int64_t ttl_seconds, Duration timeout) {
  // A repeat would grant a second lease that nobody keeps alive.
  return exchange(*transport_, "lease grant", kLeaseGrant, wire::lease_grant_request(ttl_seconds),
                  Repeat::unsent, timeout, wire::parse_lease_grant);
}

int64_t Client::lease_keep_alive(int64_t id, Duration timeout) {
  return exchange(*transport_, "lease keep-alive", kLeaseKeepAlive, wire::lease_id_request(id),
                  Repeat::always, timeout, wire::parse_keep_alive);
}

bool Client::lease_revoke(int64_t id, Duration timeout) {
  try {
    exchange(*transport_, "lease revoke", kLeaseRevoke, wire::lease_id_request(id), Repeat::always, timeout,
             [](const std::string&) { return 0; });
    return true;
  } catch (const EtcdRequestError& e) {
    if (e.grpc_code == 5) return false;  // NotFound: "requested lease not found"
    throw;
  }
}

std::string Client::endpoint() const { return transport_->current().text(); }

void Client::set_timeout(Duration timeout) { transport_->options().timeout = timeout; }

}  // namespace cxxrun::etcd
