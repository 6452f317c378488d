#include "rendezvous/listener.h"

#include <boost/asio/ip/v6_only.hpp>

#include "rendezvous/endpoint.h"

namespace cxxrun::rendezvous {

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

}  // namespace cxxrun::rendezvous
