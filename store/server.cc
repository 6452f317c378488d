#include "store/server.h"

#include <climits>
#include <stdexcept>
#include <system_error>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/endpoint.h"
#include "store/server_connection.h"
#include "store/server_impl.h"
#include "store/wire.h"

namespace cxxrun::store {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// The kernel clamps this to net.core.somaxconn: "as many as the host allows".
constexpr int kBacklog = INT_MAX;

RequestLimits checked_limits(const StoreServerOptions& options) {
  if (options.max_value_bytes == 0 || options.max_value_bytes > wire::kMaxRequestBytes)
    throw std::invalid_argument(fmt::format("the store's value limit must be 1..{} bytes, not {}",
                                            wire::kMaxRequestBytes, options.max_value_bytes));
  return RequestLimits{options.max_value_bytes};
}

size_t checked_memory_limit(const StoreServerOptions& options) {
  if (options.memory_limit == 0) throw std::invalid_argument("the store's memory limit must be positive");
  return options.memory_limit;
}

void bind_and_listen(tcp::acceptor& acceptor, const StoreServerOptions& options) {
  if (options.port < 0 || options.port > 65535)
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "store port " + std::to_string(options.port) + " is out of range");
  std::vector<tcp::endpoint> candidates;
  if (options.host.empty()) {
    candidates = net::wildcard_endpoints(options.port);
  } else {
    tcp::resolver resolver(acceptor.get_executor());
    error_code ec;
    auto results = resolver.resolve(options.host, std::to_string(options.port),
                                    tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec)
      throw std::system_error(ec, "cannot resolve store host '" + options.host + "'");
    for (const auto& entry : results) candidates.push_back(entry.endpoint());
  }
  if (error_code ec = net::listen_on_first(acceptor, candidates, kBacklog)) {
    std::string shown = options.host.empty() ? "::" : options.host;
    throw std::system_error(ec, "cannot listen on " + net::format_endpoint({shown, options.port}));
  }
}

}  // namespace

ServerImpl::ServerImpl(asio::io_context& io, const StoreServerOptions& options)
    : listener(io, "store"),
      limits(checked_limits(options)),
      memory_limit(checked_memory_limit(options)),
      token(options.token),
      auth_deadline(options.auth_deadline),
      admit(options.admit) {}

// Rare (the budget is nearly spent), so a scan of every connection is fine.
bool ServerImpl::evict_for(ServerConnection& asking, size_t bytes) {
  const auto now = std::chrono::steady_clock::now();
  while (held.load(std::memory_order_relaxed) + bytes > memory_limit) {
    std::shared_ptr<ServerConnection> victim;
    size_t most = 0;
    for (const auto& [id, connection] : connections) {
      if (connection.get() != &asking && connection->stalled(now) && connection->held() > most) {
        victim = connection;
        most = connection->held();
      }
    }
    const bool stalled = victim != nullptr;
    if (!stalled) {
      most = asking.held() + bytes;
      for (const auto& [id, connection] : connections) {
        if (connection.get() != &asking && connection->held() > most) {
          victim = connection;
          most = connection->held();
        }
      }
    }
    ServerConnection& closing = victim ? *victim : asking;
    closing.fail(fmt::format("memory limit: it holds {} bytes in unfinished requests and unsent replies{}, "
                             "and the server's memory limit of {} bytes is reached",
                             most, stalled ? fmt::format(" and sent nothing for {} ms or more", kStalledAfter.count()) : "",
                             memory_limit));
    if (!victim) return false;
  }
  return true;
}

void ServerImpl::adopt(tcp::socket socket) {
  error_code ec;
  tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  if (admit) {
    asio::ip::address peer = remote.address();
    if (peer.is_v6() && peer.to_v6().is_v4_mapped()) peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
    if (!admit(peer.to_string())) {
      log_refusal("refused a connection from " + net::endpoint_text(remote) + ": not a node of this job");
      socket.close(ec);
      return;
    }
  }
  socket.set_option(tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  StoreState::ClientId id = next_id++;
  auto connection =
      std::make_shared<ServerConnection>(shared_from_this(), std::move(socket), id, net::endpoint_text(remote));
  connections.emplace(id, connection);
  spdlog::debug("store: connection from {} ({} open)", net::endpoint_text(remote), connections.size());
  connection->start();
}

void ServerImpl::deliver(StoreState::Outcome& outcome) {
  for (StoreState::Delivery& delivery : outcome.deliveries) {
    auto it = connections.find(delivery.client);
    if (it == connections.end()) continue;
    std::shared_ptr<ServerConnection> keep = it->second;  // send() may close and forget it
    keep->send(std::move(delivery.bytes));
  }
}

// Ids grow with every connection, so the lowest unproven id has waited
// longest; a real agent proves itself within a round trip.
bool ServerImpl::reclaim_descriptor() {
  std::shared_ptr<ServerConnection> oldest;
  for (const auto& [id, connection] : connections)
    if (!connection->authenticated() && (!oldest || id < oldest->id())) oldest = connection;
  if (!oldest) return false;
  log_refusal("closing connection from " + oldest->peer() +
              ": out of file descriptors, and it has waited longest without proving the token");
  oldest->close();
  return true;
}

void ServerImpl::log_refusal(const std::string& what) {
  const auto now = std::chrono::steady_clock::now();
  if (now - refusal_window >= kRefusalWindow) {
    count_unlogged_refusals();
    refusal_window = now;
  }
  if (++refusals_in_window <= kRefusalsLogged) spdlog::warn("store: {}", what);
}

void ServerImpl::count_unlogged_refusals() {
  if (refusals_in_window > kRefusalsLogged)
    spdlog::warn("store: {} more connections refused in the last {} s, not each logged",
                 refusals_in_window - kRefusalsLogged, kRefusalWindow.count());
  refusals_in_window = 0;
}

void ServerImpl::forget(StoreState::ClientId id) {
  state.disconnect(id);
  connections.erase(id);
}

void ServerImpl::close() {
  if (closed) return;
  closed = true;
  count_unlogged_refusals();
  listener.close();
  auto all = std::move(connections);
  connections.clear();
  for (auto& [id, connection] : all) connection->close();
}

StoreServer::StoreServer(asio::io_context& io, const StoreServerOptions& options)
    : impl_(std::make_shared<ServerImpl>(io, options)) {
  bind_and_listen(impl_->listener.acceptor(), options);
  tcp::endpoint local = impl_->listener.acceptor().local_endpoint();
  port_ = local.port();
  address_ = net::endpoint_text(local);
  loopback_only_ = local.address().is_loopback();
  spdlog::debug("store: listening on {}", address_);
  ServerImpl* impl = impl_.get();
  impl_->listener.start(impl_, [impl](tcp::socket socket) { impl->adopt(std::move(socket)); });
  if (!impl_->token.empty()) impl_->listener.on_exhausted([impl] { return impl->reclaim_descriptor(); });
}

StoreServer::~StoreServer() { close(); }

int StoreServer::port() const { return port_; }
std::string StoreServer::address() const { return address_; }
bool StoreServer::loopback_only() const { return loopback_only_; }
size_t StoreServer::memory_held() const { return impl_->held.load(std::memory_order_relaxed); }
void StoreServer::close() { impl_->close(); }

}  // namespace cxxrun::store
