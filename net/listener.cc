#include "net/listener.h"

#include <boost/asio/ip/v6_only.hpp>
#include <spdlog/spdlog.h>

#include "net/endpoint.h"

namespace cxxrun::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::vector<tcp::endpoint> wildcard_endpoints(int port) {
  const auto p = static_cast<unsigned short>(port);
  return {tcp::endpoint(asio::ip::address_v6::any(), p), tcp::endpoint(asio::ip::address_v4::any(), p)};
}

error_code listen_on_first(tcp::acceptor& acceptor, const std::vector<tcp::endpoint>& candidates, int backlog) {
  error_code ec = make_error_code(boost::system::errc::address_not_available);
  for (const tcp::endpoint& endpoint : candidates) {
    error_code ignored;
    acceptor.close(ignored);
    if (acceptor.open(endpoint.protocol(), ec)) continue;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ignored);
    if (endpoint.address().is_v6() && endpoint.address().is_unspecified())
      acceptor.set_option(asio::ip::v6_only(false), ignored);
    if (acceptor.bind(endpoint, ec)) continue;
    if (acceptor.listen(backlog, ec)) continue;
    return {};
  }
  return ec;
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  asio::ip::address address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  return format_endpoint({address.to_string(), endpoint.port()});
}

AcceptLoop::AcceptLoop(asio::io_context& io, std::string who)
    : acceptor_(io), retry_(io), who_(std::move(who)) {}

void AcceptLoop::start(std::shared_ptr<void> owner, std::function<void(tcp::socket)> on_socket) {
  on_socket_ = std::move(on_socket);
  accept(std::move(owner));
}

void AcceptLoop::accept(std::shared_ptr<void> owner) {
  acceptor_.async_accept([this, owner](const error_code& ec, tcp::socket socket) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if ((ec == asio::error::no_descriptors || ec == boost::system::errc::too_many_files_open_in_system) &&
        reclaim_ && reclaim_()) {
      accept(owner);
      return;
    }
    if (ec) {
      if (!failing_) spdlog::warn("{}: accept failed: {}; retrying every 100 ms", who_, ec.message());
      failing_ = true;
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this, owner](const error_code& wait_error) {
        if (!wait_error && !closed_) accept(owner);
      });
      return;
    }
    if (failing_) spdlog::info("{}: accepting connections again", who_);
    failing_ = false;
    on_socket_(std::move(socket));
    accept(owner);
  });
}

void AcceptLoop::close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

}  // namespace cxxrun::net
