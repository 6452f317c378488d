// One persistent HTTP/2 connection (h2c, or TLS with ALPN "h2") to one etcd
// member, carrying gRPC calls, used synchronously: each call runs the
// connection's own event loop until the exchange completes or its deadline
// passes. Internal to etcd/; the failover rules built on it live in
// transport.h, the messages in wire.h.
//
// Every call is one HTTP/2 stream that sends one gRPC message and ends its
// side (END_STREAM): unary calls, and etcd's two streaming calls as we use
// them (a lease keep-alive answers the one request, then ends; a watch keeps
// answering after our side has ended). Calls on one connection go one at a
// time (the watch has a connection of its own).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "etcd/endpoints.h"

namespace cxxrun::etcd {

class TlsContext;
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

class GrpcConnection {
 public:
  GrpcConnection(Endpoint endpoint, std::shared_ptr<TlsContext> tls);
  ~GrpcConnection();
  GrpcConnection(const GrpcConnection&) = delete;
  GrpcConnection& operator=(const GrpcConnection&) = delete;

  const Endpoint& endpoint() const;

  // Sends the request and reads the whole answer (one message and the
  // status). Connects first when there is no live connection, within
  // connect_deadline (no later than deadline); a kept-alive connection the
  // member closed or sent GOAWAY on while we were idle counts as none, so a
  // restarted member costs no lost request. Throws TransportError.
  GrpcResponse call(const GrpcRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline);

  // The streaming form (watch): sends the request on a fresh connection and
  // waits for the answer's headers. A call that ended at once (trailers
  // only: a refusal) comes back with its status; otherwise status.code is 0
  // and the messages are left to read_message.
  GrpcResponse open_stream(const GrpcRequest& request, Clock::time_point deadline,
                           Clock::time_point connect_deadline);

  // The stream's next whole message, appended to `out`. False when the
  // deadline passed first; what has arrived is kept for the next call, so
  // nothing is lost between calls. A deadline already passed takes a message
  // that has arrived without waiting. Throws TransportError (lost, its
  // what() naming the status and message) when the stream ends or breaks.
  bool read_message(std::string& out, Clock::time_point deadline);

  // From any thread: the operation in progress, or the next, ends with
  // TransportError cancelled, and so does every later one.
  void interrupt();

  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cxxrun::etcd
