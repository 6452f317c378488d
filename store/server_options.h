// How a StoreServer is set up (store/server.h): where it listens, what its
// clients may hold, and who may connect. Plain values, no Asio, so the
// server's insides (store/server_impl.h) take them without the server's
// public header.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "store/wire.h"

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

}  // namespace cxxrun::store
