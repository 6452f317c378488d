#include "rendezvous/worker_store.h"

#include <arpa/inet.h>
#include <errno.h>

#include <system_error>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "net/endpoint.h"
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

std::string port_taken_message(const std::string& origin, int port, const std::string& host, bool one_node) {
  return fmt::format("{}: port {} is already in use on {}; pick another port{}", origin, port, host,
                     one_node ? ", or leave the port out (one node: a free one)" : "");
}

bool admits(const std::set<std::string>& nodes, const std::string& peer) {
  if (nodes.count(peer) > 0 || peer.rfind("127.", 0) == 0 || peer == "::1") return true;
  // This machine's own addresses are this node: workers of a one-node job
  // whose MASTER_ADDR is --local-addr connect from there.
  return net::is_local_host(peer);
}

int WorkerStore::settle(bool agent_serves, const std::string& bind_host, const std::string& addr, int port,
                        const std::vector<std::string>& members) {
  if (!agent_serves) {
    drop();
    if (port != 0) return port;
    try {
      return net::pick_free_port(addr);
    } catch (const std::exception& e) {
      throw RendezvousError("cannot find a free port for worker rank 0's store on " + addr + ": " + e.what());
    }
  }
  admitted_ = std::set<std::string>(members.begin(), members.end());
  admitted_.insert(addr);
  try {
    serve(bind_host, port);
  } catch (const std::system_error& e) {
    if (port != 0 && e.code().value() == EADDRINUSE)
      throw PortTaken(fmt::format("port {} is already in use on {}", port, addr));
    throw RendezvousError(std::string("cannot serve the workers' store: ") + e.what());
  } catch (const std::exception& e) {
    throw RendezvousError(std::string("cannot serve the workers' store: ") + e.what());
  }
  return server_->port();
}

void WorkerStore::serve(const std::string& host, int port) {
  // The old server closes first, so the same port can be bound again.
  server_.reset();
  store::StoreServerOptions options{host, port};
  options.admit = [nodes = admitted_](const std::string& peer) { return admits(nodes, peer); };
  server_ = std::make_unique<store::BackgroundStoreServer>(options);
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
