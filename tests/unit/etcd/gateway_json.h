// The v3 JSON gateway's view of etcd's gRPC messages, for tests. The client
// speaks gRPC (protobuf, etcd/wire.h), but the unit tests script the fake
// member (fake_etcd_member.h) as the gateway showed requests and took
// answers: request bodies read as JSON with base64 keys, answers written as
// {"header":{...},"kvs":[...]}. These translate between the two, by a table
// of etcd's messages (names, field numbers, kinds from
// api/etcdserverpb/rpc.proto and api/mvccpb/kv.proto) for the methods the
// client calls:
//   /etcdserverpb.KV/{Range,Put,DeleteRange,Txn}
//   /etcdserverpb.Lease/{LeaseGrant,LeaseKeepAlive,LeaseRevoke}
//   /etcdserverpb.Watch/Watch  /etcdserverpb.Auth/Authenticate
//   /etcdserverpb.Maintenance/Status
// The JSON is proto3's JSON mapping as the gateway writes it: the .proto's
// field names ("range_end", "TTL", "request_put"), bytes as base64, 64-bit
// integers as strings, enums by name, fields at their default left out
// (but a oneof member, which is there by being set, and a sub-message).
// Every call throws std::invalid_argument for what is not one of these
// messages: an unknown method, a field the table lacks (a typo in a test's
// answer must not vanish), a value of the wrong kind, bytes that do not parse.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace etcd_gateway {

// "/etcdserverpb.KV/Range" -> "/v3/kv/range": where the gateway served it.
std::string gateway_path(const std::string& grpc_method);

// The request message of `grpc_method` as the gateway showed it: compact
// JSON, keys in sorted order (as the client's own JSON was).
std::string request_json(const std::string& grpc_method, std::string_view request_proto);

// The response message of `grpc_method` from the gateway's JSON answer, in
// field-number order (as protobuf serializes). 64-bit integers may be
// strings or numbers, enums names or numbers. For the streamed methods
// (LeaseKeepAlive, Watch) the message may come wrapped as {"result": {...}}.
std::string response_proto(const std::string& grpc_method, const std::string& answer_json);

// The other direction of each, for tests that check the tables themselves.
std::string request_proto(const std::string& grpc_method, const std::string& request_json);
std::string response_json(const std::string& grpc_method, std::string_view response_proto);

// A refusal as the gateway wrote it: unary {"error":"..","message":"..",
// "code":N} or streamed {"error":{"grpc_code":N,"message":".."}}. Under
// gRPC it is the call's status (grpc-status N, grpc-message) in the
// trailers. nullopt when the answer is not one (a message, not JSON).
struct GrpcStatus {
  int code = 0;
  std::string message;
};
std::optional<GrpcStatus> error_status(const std::string& answer_json);

}  // namespace etcd_gateway
