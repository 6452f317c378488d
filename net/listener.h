// Listening TCP sockets, opened the same way by every server of ours (the
// store, the agent's health endpoint), and how their peers are named in logs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

namespace cxxrun::net {

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

// A server's listening socket and the loop that accepts on it. An accept
// error (EMFILE and friends) is logged once and retried every 100 ms, since
// retrying at once would spin on the same error.
class AcceptLoop {
 public:
  // `who` names the server in its log lines ("store", "health server").
  AcceptLoop(boost::asio::io_context& io, std::string who);

  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }

  // Accepts until close(), handing each connection to `on_socket`. The
  // pending operations hold `owner` (the server this loop is part of), so
  // the loop and whatever on_socket uses outlive them.
  void start(std::shared_ptr<void> owner, std::function<void(boost::asio::ip::tcp::socket)> on_socket);
  // Called when accept fails for want of descriptors (EMFILE, ENFILE): true
  // when it closed something, and the accept is tried again at once.
  void on_exhausted(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }
  void close();

 private:
  void accept(std::shared_ptr<void> owner);

  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  std::string who_;
  std::function<void(boost::asio::ip::tcp::socket)> on_socket_;
  std::function<bool()> reclaim_;
  bool failing_ = false;
  bool closed_ = false;
};

}  // namespace cxxrun::net
