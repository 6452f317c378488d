// etcd's v3 API messages, as gRPC carries them: each request built and each
// response parsed as serialized protobuf (proto3; the 5-byte gRPC frame is
// the connection's), without any I/O, so the unit tests check every shape.
//
// Field numbers are etcd's (api/etcdserverpb/rpc.proto, api/mvccpb/kv.proto).
// Requests leave a field at its default out (0, false, empty), as proto3
// does; oneof members (a transaction's compare target and operations, the
// watch's create_request) are always written. Parsers read a field left out
// as 0, false or empty, skip fields they do not know (a newer etcd may add
// some) and throw Malformed for bytes that are not a message (a varint or
// length cut short) or a known field of the wrong wire type. Errors are not
// here: gRPC carries a refusal in the stream's trailers (grpc-status,
// grpc-message), never in a response message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/protobuf.h"
#include "etcd/types.h"

namespace cxxrun::etcd::wire {

// The answer was not a message of the expected kind; the caller adds the
// endpoint.
using protobuf::Malformed;

// RangeRequest.
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
std::string put_request(const std::string& key, const std::string& value, int64_t lease);  // PutRequest
std::string delete_request(const std::string& key, const std::string& range_end);        // DeleteRangeRequest
// TxnRequest; an Op::Kind::txn becomes a nested RequestOp.request_txn.
std::string txn_request(const std::vector<Compare>& compares, const std::vector<Op>& success,
                        const std::vector<Op>& failure);
std::string lease_grant_request(int64_t ttl_seconds);
// LeaseKeepAliveRequest and LeaseRevokeRequest: the same message, ID = 1.
std::string lease_id_request(int64_t id);
std::string authenticate_request(const std::string& name, const std::string& password);
// WatchRequest{create_request{key, range_end, start_revision, progress_notify, prev_kv}}.
// start_revision 0: from the revision after the one current at creation.
std::string watch_create_request(const std::string& key, const std::string& range_end, int64_t start_revision,
                                 bool prev_kv = false);

GetResult parse_get(std::string_view body);      // RangeResponse, its first key
RangeResult parse_range(std::string_view body);  // RangeResponse
CountResult parse_count(std::string_view body);  // RangeResponse of a count_only range
int64_t parse_revision(std::string_view body);   // PutResponse: the header's revision
int64_t parse_deleted(std::string_view body);    // DeleteRangeResponse
TxnResult parse_txn(std::string_view body);
// LeaseGrantResponse; its `error` set also throws Malformed.
Lease parse_lease_grant(std::string_view body);
// LeaseKeepAliveResponse: the remaining TTL; 0 when the lease is gone
// (etcd answers TTL 0; below 0 is read as 0).
int64_t parse_keep_alive(std::string_view body);
// AuthenticateResponse; an empty token throws Malformed.
std::string parse_token(std::string_view body);

// Member ids are uint64s, beyond int64: kept as their decimal text.
// The id of the member that answered (ResponseHeader.member_id, field 1 of
// every response), "" when the answer does not say. Reads the top-level
// fields up to the header only, without copying, so that every answer can
// afford it; never throws (an answer that does not parse gives "", and the
// full parse says why).
std::string parse_member_id(std::string_view body);
// The raft term the answering member was in (ResponseHeader.raft_term), 0
// when the answer does not say; read as parse_member_id reads. Each
// election starts a higher term.
int64_t parse_raft_term(std::string_view body);
// StatusResponse: the id of the leader this member follows, "" when it
// knows none.
std::string parse_status_leader(std::string_view body);

// A stream's refusal is not a message: gRPC carries it in the trailers.
struct WatchMessage {
  enum class Kind { created, events, progress, canceled };
  Kind kind = Kind::progress;
  int64_t revision = 0;  // the header's
  std::vector<WatchEvent> events;
  int64_t compact_revision = 0;  // canceled: the oldest revision still kept
  std::string cancel_reason;
};
// WatchResponse. An event of a type other than PUT or DELETE throws Malformed.
WatchMessage parse_watch_message(std::string_view message);

}  // namespace cxxrun::etcd::wire
