// The JSON that etcd's v3 gateway (grpc-gateway) takes and gives, built and
// parsed without any I/O so the unit tests can check every shape.
//
// The gateway speaks proto3's JSON mapping: bytes fields (keys, values) are
// base64; int64 fields arrive as JSON strings ("revision":"42"), though
// numbers are accepted too; a field at its default (0, false, empty, the
// first enum value such as PUT or EQUAL) is left out altogether. Unary
// answers are the response message itself; a streamed one (watch, lease
// keep-alive) is wrapped as {"result": message} or {"error": status}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/errors.h"
#include "etcd/types.h"

namespace cxxrun::etcd::wire {

// The answer was not what the gateway sends; the caller adds the endpoint.
struct Malformed : EtcdError {
  using EtcdError::EtcdError;
};

std::string range_request(const std::string& key, const std::string& range_end);
// The same range, answered with its size only (count_only) or with keys
// and no values (keys_only).
enum class RangeShape { count_only, keys_only };
std::string range_request(const std::string& key, const std::string& range_end, RangeShape shape);
// One key as it was at `revision` (etcd keeps history back to its last
// compaction).
std::string range_at_request(const std::string& key, int64_t revision);
// At most `limit` keys of the range as of `revision` (0: now).
std::string range_page_request(const std::string& key, const std::string& range_end, int64_t limit, int64_t revision);
std::string put_request(const std::string& key, const std::string& value, int64_t lease);
std::string delete_request(const std::string& key, const std::string& range_end);
std::string txn_request(const std::vector<Compare>& compares, const std::vector<Op>& success,
                        const std::vector<Op>& failure);
std::string lease_grant_request(int64_t ttl_seconds);
std::string lease_id_request(int64_t id);  // keep-alive, revoke
std::string authenticate_request(const std::string& name, const std::string& password);
// start_revision 0: from the revision after the one current at creation.
std::string watch_create_request(const std::string& key, const std::string& range_end, int64_t start_revision);

GetResult parse_get(std::string_view body);
RangeResult parse_range(std::string_view body);
CountResult parse_count(std::string_view body);
int64_t parse_revision(std::string_view body);  // put: the header's revision
int64_t parse_deleted(std::string_view body);
TxnResult parse_txn(std::string_view body);
Lease parse_lease_grant(std::string_view body);
// The remaining TTL; 0 when the lease is gone (etcd leaves TTL out).
int64_t parse_keep_alive(std::string_view body);
std::string parse_token(std::string_view body);

// Member ids are uint64s, beyond int64: kept as their decimal text.
// The id of the member that answered (header.member_id), "" when the body
// does not say. Looked for only in the first bytes, where the gateway puts
// the header, so that every answer can afford it.
std::string parse_member_id(std::string_view body);
// The raft term the answering member was in (header.raft_term), 0 when the
// body does not say; looked for as parse_member_id looks. Each election
// starts a higher term.
int64_t parse_raft_term(std::string_view body);
// /v3/maintenance/status: the id of the leader this member follows, "" when
// it knows none.
std::string parse_status_leader(std::string_view body);

// A refusal: gRPC's status code and etcd's message ("etcdserver: no leader").
struct ServerError {
  int code = 0;
  std::string message;
};

// The status in an error answer's body, unary ({"error":..,"code":..}) or
// streamed ({"error":{"grpc_code":..,"message":..}}); nullopt when the body
// is not one (not JSON at all, e.g. a proxy's HTML page).
std::optional<ServerError> parse_error(std::string_view body);

struct WatchMessage {
  enum class Kind { created, events, progress, canceled, error };
  Kind kind = Kind::progress;
  int64_t revision = 0;  // the header's
  std::vector<WatchEvent> events;
  int64_t compact_revision = 0;  // canceled: the oldest revision still kept
  std::string cancel_reason;
  ServerError error;
};
WatchMessage parse_watch_message(std::string_view object);

}  // namespace cxxrun::etcd::wire
