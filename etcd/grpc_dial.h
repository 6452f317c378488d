// Reaching one etcd member for a GrpcConnection: its address (looked up
// only when it is a name), a TCP connection, and over TLS the handshake
// that checks the member's certificate as etcd's Go clients do and asks for
// HTTP/2 (ALPN "h2"), which gRPC needs. Each step runs the connection's own
// io_context until it is done or the deadline passes; at the deadline the
// step is cancelled and run to its end, so no handler outlives it.
// Internal to etcd/: grpc_connection.cc's, apart from the calls it carries.
//
// Errors: TransportError, nothing sent (unreachable: no lookup, no
// connection, or no handshake in time; tls: the handshake refused, worded by
// handshake.h; cancelled: `interrupted` was set).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "etcd/endpoints.h"
#include "etcd/grpc_call.h"

namespace cxxrun::etcd {

class TlsContext;

class GrpcDial {
 public:
  using tcp = boost::asio::ip::tcp;

  // `ioc` and `endpoint` outlive this.
  GrpcDial(boost::asio::io_context& ioc, const Endpoint& endpoint);

  // A TCP connection to the member, Nagle off.
  tcp::socket connect(Clock::time_point deadline, const std::atomic<bool>& interrupted);
  // The TLS handshake on `stream`, checked against `tls`.
  void handshake(boost::asio::ssl::stream<tcp::socket>& stream, const TlsContext& tls, Clock::time_point deadline,
                 const std::atomic<bool>& interrupted);

  // From the loop (GrpcConnection::interrupt, or a close): the step in
  // progress ends now. A connect to a member that drops SYNs would
  // otherwise end only when the kernel gives up, about two minutes later.
  void cancel();

 private:
  // Runs the loop until `done`; false at the deadline, once the step is
  // cancelled and run to its end.
  bool run(const bool& done, Clock::time_point deadline);
  void throw_if_interrupted(const std::atomic<bool>& interrupted) const;

  boost::asio::io_context& ioc_;
  const Endpoint& endpoint_;
  tcp::resolver resolver_;
  tcp::socket* connecting_ = nullptr;   // closed by cancel()
  tcp::socket* handshaking_ = nullptr;  // its reads and writes cancelled by cancel()
};

}  // namespace cxxrun::etcd
