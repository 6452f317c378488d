// One client connection of a StoreServer: reads and buffers its requests,
// has them parsed and applied, queues and writes its replies, and counts
// every byte its buffers hold against the server's memory budget. Private to
// store/ (Asio inside); server_impl.h is the server side it talks to.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "store/auth_gate.h"
#include "store/request.h"
#include "store/server_impl.h"
#include "store/state.h"

namespace cxxrun::store {

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(std::shared_ptr<ServerImpl> server, boost::asio::ip::tcp::socket socket,
                   StoreState::ClientId id, std::string peer);

  // Reads, and with a token, closes the connection if it has not proved it
  // by the server's auth_deadline.
  void start();

  // Queues bytes for the client (its replies, a woken WAIT, a watch push).
  void send(std::string bytes);

  // A connection the server will not keep: one log line naming the peer and
  // `why`, then close. (Refusals at the door are logged by the server's
  // log_refusal, which keeps a flood of them from flooding the log.)
  void fail(const std::string& why);
  void close();

  // Bytes its buffers hold now, as the budget counts them.
  size_t held() const { return held_; }
  // Holds part of a request and has received nothing for kStalledAfter.
  bool stalled(std::chrono::steady_clock::time_point now) const {
    return !in_.empty() && now - last_input_ >= kStalledAfter;
  }
  StoreState::ClientId id() const { return id_; }
  const std::string& peer() const { return peer_; }
  // Through the token handshake (or none was needed).
  bool authenticated() const { return server_->token.empty() || gate_.open(); }

 private:
  bool paused() const;
  void arm_read();
  void on_read(boost::system::error_code ec, size_t n);
  bool reserve_input(size_t extra);
  void process_and_flush();
  void process();
  bool pass_gate(size_t& start);
  void answer_requests(size_t& start);
  void refuse(std::string reply, const std::string& why);
  void write();
  void on_written(const boost::system::error_code& ec);
  void account();

  std::shared_ptr<ServerImpl> server_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer auth_timer_;
  StoreState::ClientId id_;
  std::string peer_;
  // The token handshake, before any request (docs/store-protocol.md §9).
  AuthGate gate_;
  OpTable table_ = OpTable::unknown;
  // A vector, not a string: reserve() then allocates exactly what the budget
  // was charged (a string would round up to twice its old capacity).
  std::vector<char> in_;
  size_t needed_ = 1;
  std::string out_;
  std::string writing_;
  size_t held_ = 0;
  std::chrono::steady_clock::time_point last_input_ = std::chrono::steady_clock::now();
  std::array<char, 512> first_;
  bool read_armed_ = false;
  bool write_active_ = false;
  bool processing_ = false;
  bool closed_ = false;
};

}  // namespace cxxrun::store
