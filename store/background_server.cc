// BackgroundStoreServer: a StoreServer plus the one thread that runs its loop.
#include <exception>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include "store/server.h"

namespace cxxrun::store {

struct BackgroundStoreServer::Impl {
  explicit Impl(const StoreServerOptions& options) : server(io, options) {}

  // Declared first so it is destroyed last: handlers still queued in it hold
  // the server's connections, and release them as it goes.
  boost::asio::io_context io{1};
  StoreServer server;
  std::thread thread;
};

BackgroundStoreServer::BackgroundStoreServer(const StoreServerOptions& options)
    : impl_(std::make_unique<Impl>(options)) {
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->io.run();
    } catch (const std::exception& e) {
      spdlog::critical("store: server loop stopped: {}", e.what());
    }
  });
}

BackgroundStoreServer::~BackgroundStoreServer() { stop(); }

int BackgroundStoreServer::port() const { return impl_->server.port(); }
std::string BackgroundStoreServer::address() const { return impl_->server.address(); }
bool BackgroundStoreServer::loopback_only() const { return impl_->server.loopback_only(); }
size_t BackgroundStoreServer::memory_held() const { return impl_->server.memory_held(); }

// Stopping the loop first and closing afterwards, on this thread, keeps every
// socket touched by one thread at a time without a handshake with the loop.
void BackgroundStoreServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
  impl_->server.close();
}

}  // namespace cxxrun::store
