// Listening TCP sockets, opened the same way by every server of ours (the
// store, the agent's health endpoint), and how their peers are named in logs.
#pragma once

#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace cxxrun::rendezvous {

// The v6 wildcard (dual-stack), then the v4 one for hosts without IPv6.
std::vector<boost::asio::ip::tcp::endpoint> wildcard_endpoints(int port);

// Opens, binds and listens `acceptor` on the first of `candidates` that
// works. SO_REUSEADDR as torch sets it: a port in TIME_WAIT from an earlier
// job is not "in use", a live listener still is. Returns success, or the
// error of the last candidate tried.
boost::system::error_code listen_on_first(boost::asio::ip::tcp::acceptor& acceptor,
                                          const std::vector<boost::asio::ip::tcp::endpoint>& candidates,
                                          int backlog);

// "host:port" as format_endpoint writes it, with a v4-mapped v6 address
// shown as the IPv4 address the peer used.
std::string endpoint_text(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace cxxrun::rendezvous
