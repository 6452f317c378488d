// A gRPC call's parts as a GrpcConnection exchanges them: the request, the
// status it ends with, the answer, and why an exchange failed. Below the
// connection and its HTTP/2 session, which both speak them. Internal to
// etcd/.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace cxxrun::etcd {

using Clock = std::chrono::steady_clock;

// A call's end. status is gRPC's (0 OK, 14 unavailable, ...), from the
// trailers (or from a trailers-only answer's headers); message is
// grpc-message, percent-decoded. An answer whose HTTP status is not 200
// comes back with status from the HTTP status as gRPC maps it (400: 13;
// 401: 16; 403: 7; 404: 12; 429, 502, 503, 504: 14; others 2) and message
// "HTTP <n>".
struct GrpcStatus {
  int code = 0;
  std::string message;
};

// Why an exchange failed; what() is the cause alone ("connection refused"),
// the caller adds the endpoint.
struct TransportError : std::runtime_error {
  enum class Kind {
    unreachable,  // resolve, connect or a handshake that broke off
    tls,          // the TLS handshake was refused, by us or by the member
    lost,         // the connection broke, or the answer was not gRPC
    timeout,      // the deadline passed
    cancelled,    // interrupt()
  };
  TransportError(Kind k, bool s, bool p, const std::string& what, std::optional<GrpcStatus> st = std::nullopt)
      : std::runtime_error(what), kind(k), sent(s), permanent(p), status(std::move(st)) {}
  Kind kind;
  bool sent;       // the request's bytes had started to go out: it may have been applied
  bool permanent;  // trying this endpoint again cannot help (no such host, TLS refused)
  // A stream that the member ended with a status (read_message: lost), so a
  // watch can tell a compaction or a refusal from a broken connection.
  std::optional<GrpcStatus> status;
};

struct GrpcRequest {
  std::string method;   // "/etcdserverpb.KV/Range"
  std::string message;  // the serialized request message, without gRPC's 5-byte frame
  std::string token;    // etcd's auth token, sent as metadata "token"; empty: none
};

struct GrpcResponse {
  GrpcStatus status;
  std::string message;  // the one response message (unary), unframed; empty if none came
};

// Sent with every request: metadata hasleader=true, so a member without a
// leader refuses at once with "no leader", as for etcd's WithRequireLeader.
inline constexpr char kRequireLeaderHeader[] = "hasleader";

}  // namespace cxxrun::etcd
