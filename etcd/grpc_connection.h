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
// time (the watch has a connection of its own, which its next stream reuses).
#pragma once

#include <memory>
#include <string>

#include "etcd/endpoints.h"
#include "etcd/grpc_call.h"

namespace cxxrun::etcd {

class TlsContext;

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
  // restarted member costs no lost request; and a stream the member refused
  // unprocessed (REFUSED_STREAM, as a GOAWAY still on its way when we looked
  // does) goes again once on a fresh connection. Throws TransportError; lost
  // with sent false where the member refused the stream on a fresh one.
  GrpcResponse call(const GrpcRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline);

  // The streaming form (watch): sends the request and waits for the
  // answer's headers. A stream already open is cancelled first; the new one
  // goes on the same connection where it is still live (a watch moved to
  // another key costs the member a stream, not a connection), on a fresh
  // one where not, and again once on a fresh one where the member refused
  // it unprocessed. A call that ended at once (trailers only: a refusal)
  // comes back with its status; otherwise status.code is 0 and the
  // messages are left to read_message.
  GrpcResponse open_stream(const GrpcRequest& request, Clock::time_point deadline,
                           Clock::time_point connect_deadline);

  // Cancels the open stream (RST_STREAM CANCEL) and keeps the connection
  // for the next open_stream: what the member still sends for the stream is
  // dropped as it arrives. Does not block.
  void end_stream();

  // The stream's next whole message, appended to `out`. False when the
  // deadline passed first; what has arrived is kept for the next call, so
  // nothing is lost between calls. A deadline already passed takes a message
  // that has arrived without waiting. Throws TransportError lost when the
  // stream ends (with the status it ended with, also named in what(), where
  // the member sent one) or breaks (no status).
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
