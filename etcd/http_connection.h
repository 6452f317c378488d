// One persistent HTTP/1.1 connection (plain or TLS) to one etcd member, used
// synchronously: each call runs the connection's own event loop until the
// exchange completes or its deadline passes. Internal to etcd/; the
// failover rules built on it live in transport.h.
#pragma once

#include <memory>
#include <string>

#include "etcd/endpoints.h"
#include "etcd/grpc_call.h"

namespace cxxrun::etcd {

class TlsContext;

// TransportError and Clock are grpc_call.h's: one definition for the two
// connections while both exist (this one goes when the client speaks gRPC).

struct HttpResponse {
  int status = 0;
  std::string body;
};

struct HttpRequest {
  std::string target;  // "/v3/kv/put"
  std::string body;    // JSON
  std::string token;   // etcd's auth token, sent as Authorization; empty: none
};

// Sent with every request: gRPC metadata hasleader=true (grpc-gateway passes
// Grpc-Metadata-* headers on as metadata), so a member without a leader
// refuses at once with "no leader", as for etcd's WithRequireLeader.
inline constexpr char kGatewayRequireLeaderHeader[] = "Grpc-Metadata-Hasleader";

class HttpConnection {
 public:
  HttpConnection(Endpoint endpoint, std::shared_ptr<TlsContext> tls);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  const Endpoint& endpoint() const;

  // POSTs the request and reads the whole answer. Connects first when there
  // is no live connection, within connect_deadline (no later than deadline);
  // a kept-alive connection the member closed while we were idle counts as
  // none, so a restarted member costs no lost request. Throws TransportError.
  HttpResponse post(const HttpRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline);

  // The streaming form (watch): POSTs on a fresh connection and reads the
  // answer's header. A status other than 200 comes back with its whole
  // body; with 200 the body is left to read_stream.
  HttpResponse open_stream(const HttpRequest& request, Clock::time_point deadline,
                           Clock::time_point connect_deadline);

  // Appends the stream's body bytes as they arrive. False when the deadline
  // passed first; the read stays pending for the next call, so nothing is
  // lost between calls. A deadline already passed takes what has arrived
  // without waiting. Throws TransportError when the stream ends or breaks.
  bool read_stream(std::string& out, Clock::time_point deadline);

  // From any thread: the operation in progress, or the next, ends with
  // TransportError cancelled, and so does every later one.
  void interrupt();

  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cxxrun::etcd
