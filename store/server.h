// A TCPStore-compatible server (docs/store-protocol.md §1 and §4): torch 1.13
// clients (legacy opcodes) and torch >= 2.2 clients (VALIDATE handshake) on one
// port and one key space. Single-threaded: one Asio io_context serves every
// connection. Asio stays out of this header so including it costs nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "store/server_options.h"

namespace boost::asio {
class io_context;
}

namespace cxxrun::store {

// The server's insides (store/server_impl.h), private to store/.
struct ServerImpl;

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

 private:
  std::shared_ptr<ServerImpl> impl_;
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
