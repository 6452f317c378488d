// StoreServer's insides, shared by server.cc (the listener, the connection
// table, the memory budget) and server_connection.cc (one client). Private
// to store/: it brings in Asio, so nothing outside those two includes it.
// It takes its settings from store/server_options.h, never store/server.h:
// the public class sits above its insides.
#pragma once

#include <array>
#include <chrono>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "net/listener.h"
#include "store/request.h"
#include "store/server_options.h"
#include "store/state.h"

namespace cxxrun::store {

class ServerConnection;

// The most a connection reads per turn of the loop beyond its own small
// buffer, through the server's shared scratch buffer.
inline constexpr size_t kServerReadChunk = 64 * 1024;
// A connection holding part of a request that has received nothing for this
// long is stalled: the memory budget closes such connections first.
inline constexpr std::chrono::milliseconds kStalledAfter{1000};
inline constexpr std::chrono::seconds kRefusalWindow{10};
inline constexpr int kRefusalsLogged = 10;

struct ServerImpl : std::enable_shared_from_this<ServerImpl> {
  ServerImpl(boost::asio::io_context& io, const StoreServerOptions& options);

  void adopt(boost::asio::ip::tcp::socket socket);
  void deliver(StoreState::Outcome& outcome);
  void forget(StoreState::ClientId id);
  // Out of descriptors: closes the connection that has waited longest
  // without proving the token. False when there is none to close.
  bool reclaim_descriptor();
  // One line for a connection refused at the door (no token, a wrong one,
  // no proof in time, not a node of the job): the first kRefusalsLogged in a
  // kRefusalWindow each, then one line saying how many more, so a flood of
  // strangers cannot flood the log too.
  // `what` is the line after "store: ".
  void log_refusal(const std::string& what);
  // The line for the refusals not logged one by one, if any.
  void count_unlogged_refusals();
  void close();

  // The memory budget (docs/store-protocol.md §5). `asking` is about to
  // allocate `bytes` more for its buffers (while the ones they replace still
  // exist). Until that fits under the limit, a connection is closed with one
  // log line: first the stalled ones (kStalledAfter), the largest first, for
  // they are the likeliest to be attacks or dead peers; then the one holding
  // the most (`asking` counted with `bytes`), which may be a legitimate large
  // SET. False when `asking` itself was closed.
  bool make_room(ServerConnection& asking, size_t bytes) {
    return held.load(std::memory_order_relaxed) + bytes <= memory_limit || evict_for(asking, bytes);
  }
  bool evict_for(ServerConnection& asking, size_t bytes);
  // A connection's buffers now hold `after` bytes instead of `before`.
  void held_changed(size_t before, size_t after) {
    // Only the loop thread writes; the atomic lets memory_held() read it from
    // any thread, and relaxed loads and stores cost what plain ones do.
    held.store(held.load(std::memory_order_relaxed) - before + after, std::memory_order_relaxed);
  }

  net::AcceptLoop listener;
  const RequestLimits limits;
  const size_t memory_limit;
  // Empty: connections need no token.
  const std::string token;
  const std::chrono::milliseconds auth_deadline;
  // Empty: every peer may connect (StoreServerOptions::admit).
  const std::function<bool(const std::string&)> admit;
  std::atomic<size_t> held{0};
  bool closed = false;
  std::chrono::steady_clock::time_point refusal_window{};
  int refusals_in_window = 0;
  StoreState state;
  std::unordered_map<StoreState::ClientId, std::shared_ptr<ServerConnection>> connections;
  StoreState::ClientId next_id = 1;
  // Every connection reads through this one buffer: the loop is
  // single-threaded, and an idle connection then holds no read buffer at all.
  std::array<char, kServerReadChunk> scratch;
};

}  // namespace cxxrun::store
