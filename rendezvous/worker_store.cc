#include "rendezvous/worker_store.h"

#include <arpa/inet.h>

#include <spdlog/spdlog.h>

#include "store/endpoint.h"
#include "rendezvous/rendezvous.h"
#include "store/server.h"

namespace cxxrun::rendezvous {

WorkerStore::WorkerStore() = default;
WorkerStore::~WorkerStore() = default;

std::string bind_host_for(const std::string& addr) {
  unsigned char buf[sizeof(in6_addr)];
  const bool literal = inet_pton(AF_INET, addr.c_str(), buf) == 1 || inet_pton(AF_INET6, addr.c_str(), buf) == 1;
  return literal || addr == "localhost" ? addr : "";
}

int WorkerStore::settle(bool agent_serves, const std::string& bind_host, const std::string& addr, int port) {
  if (!agent_serves) {
    drop();
    if (port != 0) return port;
    try {
      return store::pick_free_port(addr);
    } catch (const std::exception& e) {
      throw RendezvousError("cannot find a free port for worker rank 0's store on " + addr + ": " + e.what());
    }
  }
  try {
    serve(bind_host, port);
  } catch (const std::exception& e) {
    throw RendezvousError(std::string("cannot serve the workers' store: ") + e.what());
  }
  return server_->port();
}

void WorkerStore::serve(const std::string& host, int port) {
  // The old server closes first, so the same port can be bound again.
  server_.reset();
  server_ = std::make_unique<store::BackgroundStoreServer>(store::StoreServerOptions{host, port});
  host_ = host;
  spdlog::info("serving the workers' store on {}", server_->address());
}

void WorkerStore::renew() {
  if (!server_) return;
  try {
    serve(host_, server_->port());
  } catch (const std::exception& e) {
    throw RendezvousError(std::string("cannot serve the workers' store again: ") + e.what());
  }
}

void WorkerStore::drop() { server_.reset(); }

}  // namespace cxxrun::rendezvous
