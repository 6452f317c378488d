// A TCPStore-compatible server (docs/store-protocol.md §1 and §4): torch 1.13
// clients (legacy opcodes) and torch >= 2.2 clients (VALIDATE handshake) on one
// port and one key space. Single-threaded: one Asio io_context serves every
// connection. Asio stays out of this header so including it costs nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "store/wire.h"

namespace boost::asio {
class io_context;
}

namespace cxxrun::store {

struct StoreServerOptions {
  // Empty: every interface, "::" dual-stack, or 0.0.0.0 where IPv6 is off.
  // Otherwise an address or a name; the first address it resolves to that
  // binds is used.
  std::string host;
  // 0: any free port (port() says which).
  int port = 0;
  // The memory budget (docs/store-protocol.md §5): what all connections
  // together may hold in requests still arriving and replies not yet sent.
  // An allocation that would pass it closes the connection holding the most.
  size_t memory_limit = wire::kDefaultMemoryLimit;
  // The longest value a request may carry (§5): 1..wire::kMaxRequestBytes.
  size_t max_value_bytes = wire::kMaxValueBytes;
  // The shared secret (§9). Non-empty: every connection must prove it knows
  // it before its first request, or is closed; torch's clients cannot.
  std::string token{};
  // With a token: how long a connection may take to prove it before it is
  // closed (wire::kAuthDeadline). And when the server runs out of
  // descriptors, the connection that has waited longest without proving it
  // is closed to make room for a new one.
  std::chrono::milliseconds auth_deadline = wire::kAuthDeadline;
  // Which peers may connect at all, for a server whose clients cannot give a
  // token (the workers' store; rendezvous/worker_store.h): called on the
  // server's thread with the peer's IP address ("10.0.0.5", "::1"; a
  // v4-mapped address as its IPv4 form). False closes the connection at
  // once, logged. Empty: every peer.
  std::function<bool(const std::string& peer_ip)> admit{};
};

class StoreServer {
 public:
  // Binds and listens before returning, so a taken port fails here:
  // std::system_error whose what() names host:port; a limit out of range is
  // std::invalid_argument. Serves once `io` runs.
  StoreServer(boost::asio::io_context& io, const StoreServerOptions& options);
  // Closes every connection; same thread rule as close().
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The bound port and "host:port" (e.g. "[::]:29500"); any thread.
  int port() const;
  std::string address() const;
  // Whether it listens on a loopback address only; any thread.
  bool loopback_only() const;
  // Bytes held for clients right now, as the memory budget counts them; any
  // thread (a snapshot).
  size_t memory_held() const;

  // Stops accepting and closes every connection. Call it on the thread that
  // runs `io`, or while nothing runs it.
  void close();

  // Defined in server.cc; named here only so its helpers can see it.
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  int port_;
  std::string address_;
  bool loopback_only_ = false;
};

// A StoreServer on its own io_context and thread, for a caller whose own
// thread makes blocking store calls (the agent hosting the rendezvous store).
class BackgroundStoreServer {
 public:
  // Binds (throws like StoreServer), then starts serving on a new thread.
  explicit BackgroundStoreServer(const StoreServerOptions& options);
  ~BackgroundStoreServer();
  BackgroundStoreServer(const BackgroundStoreServer&) = delete;
  BackgroundStoreServer& operator=(const BackgroundStoreServer&) = delete;

  int port() const;
  std::string address() const;
  bool loopback_only() const;
  size_t memory_held() const;

  // Stops the loop, joins the thread, closes every connection. Idempotent;
  // any thread but the server's own.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cxxrun::store
