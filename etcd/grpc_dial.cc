#include "etcd/grpc_dial.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cstring>
#include <vector>

#include "etcd/handshake.h"
#include "etcd/tls.h"

namespace cxxrun::etcd {
namespace {

namespace asio = boost::asio;
using error_code = boost::system::error_code;
using Kind = TransportError::Kind;

}  // namespace

GrpcDial::GrpcDial(asio::io_context& ioc, const Endpoint& endpoint)
    : ioc_(ioc), endpoint_(endpoint), resolver_(ioc) {}

void GrpcDial::cancel() {
  resolver_.cancel();
  error_code ignored;
  if (connecting_) connecting_->close(ignored);
  if (handshaking_) handshaking_->cancel(ignored);
}

bool GrpcDial::run(const bool& done, Clock::time_point deadline) {
  ioc_.restart();
  while (!done) {
    if (ioc_.run_one_until(deadline) > 0) continue;
    if (done) break;
    if (Clock::now() < deadline && !ioc_.stopped()) continue;
    cancel();
    ioc_.restart();
    while (!done && ioc_.run_one() > 0) {
    }
    return false;
  }
  return true;
}

void GrpcDial::throw_if_interrupted(const std::atomic<bool>& interrupted) const {
  if (interrupted) throw TransportError(Kind::cancelled, false, false, "cancelled");
}

GrpcDial::tcp::socket GrpcDial::connect(Clock::time_point deadline, const std::atomic<bool>& interrupted) {
  throw_if_interrupted(interrupted);
  bool done = false;
  error_code ec;
  std::vector<tcp::endpoint> addresses;
  // A member given by its address needs no lookup. Asio's resolver runs
  // each io_context's lookups on a thread of its own: a thread per
  // connection, 5,000 of them for 3,000 simulated agents over etcd.
  if (const auto address = asio::ip::make_address(endpoint_.host, ec); !ec) {
    addresses.emplace_back(address, endpoint_.port);
  } else {
    resolver_.async_resolve(endpoint_.host, std::to_string(endpoint_.port),
                            [&](error_code e, const tcp::resolver::results_type& r) {
                              ec = e;
                              for (const auto& entry : r) addresses.push_back(entry.endpoint());
                              done = true;
                            });
    const bool in_time = run(done, deadline);
    throw_if_interrupted(interrupted);
    if (!in_time) throw TransportError(Kind::unreachable, false, false, "resolving the host timed out");
    if (ec)  // no such host is permanent; a failing resolver may recover
      throw TransportError(Kind::unreachable, false, ec == asio::error::host_not_found,
                           "cannot resolve host: " + ec.message());
  }

  tcp::socket socket(ioc_);
  done = false;
  asio::async_connect(socket, addresses, [&](error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  connecting_ = &socket;
  const bool in_time = run(done, deadline);
  connecting_ = nullptr;
  throw_if_interrupted(interrupted);
  if (!in_time) throw TransportError(Kind::unreachable, false, false, "connect timed out");
  if (ec) throw TransportError(Kind::unreachable, false, false, ec.message());
  socket.set_option(tcp::no_delay(true), ec);
  return socket;
}

void GrpcDial::handshake(asio::ssl::stream<tcp::socket>& stream, const TlsContext& tls, Clock::time_point deadline,
                         const std::atomic<bool>& interrupted) {
  SSL* ssl = stream.native_handle();
  expect_member(ssl, endpoint_.host);
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_set_alpn_protos(ssl, kAlpn, sizeof kAlpn);
  bool done = false;
  error_code ec;
  stream.async_handshake(asio::ssl::stream_base::client, [&](error_code e) {
    ec = e;
    done = true;
  });
  handshaking_ = &stream.next_layer();
  const bool in_time = run(done, deadline);
  handshaking_ = nullptr;
  throw_if_interrupted(interrupted);
  if (!in_time) throw TransportError(Kind::unreachable, false, false, "TLS handshake timed out");
  if (!ec) {
    const unsigned char* chosen = nullptr;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl, &chosen, &length);
    if (length == 2 && std::memcmp(chosen, "h2", 2) == 0) return;
    throw TransportError(Kind::tls, false, true, "TLS: the member did not agree to HTTP/2 (ALPN h2), which gRPC needs");
  }
  throw handshake_error(ec, SSL_get_verify_result(ssl), tls);
}

}  // namespace cxxrun::etcd
