#include "worker_runtime/bootstrap.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <system_error>
#include <tuple>

#include "common/env_names.h"
#include "store/server.h"

namespace cxxrun::worker {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::shared_ptr<store::BackgroundStoreServer> serve_store(int port) {
  // Never erased: see StoreLink::hosted. Destroyed at exit, which stops the
  // server's thread before the process goes.
  static std::mutex mu;
  static std::map<int, std::shared_ptr<store::BackgroundStoreServer>> servers;
  std::lock_guard lock(mu);
  auto& server = servers[port];
  if (!server) {
    try {
      // Every interface: peers on other hosts reach MASTER_ADDR, which names
      // this host by whatever address the launcher chose.
      server = std::make_shared<store::BackgroundStoreServer>(store::StoreServerOptions{"", port});
    } catch (const std::exception& e) {
      servers.erase(port);
      throw CollectiveError("rank 0 cannot serve the store on MASTER_PORT=" + std::to_string(port) + ": " +
                            e.what());
    }
  }
  return server;
}

}  // namespace

BootstrapEnv read_bootstrap_env() {
  BootstrapEnv env;
  env.worker = read_worker_env();
  // torch compares with the literal Python str(True).
  env.use_agent_store = env_or_empty(cxxrun::env::kUseAgentStore) == "True";
  std::string ifname = env_or_empty("GLOO_SOCKET_IFNAME");
  env.socket_ifname = ifname.substr(0, ifname.find(','));
  return env;
}

StoreLink connect_store(const BootstrapEnv& env, std::chrono::milliseconds timeout) {
  StoreLink link;
  const WorkerEnv& w = env.worker;
  if (w.rank == 0 && !env.use_agent_store) link.hosted = serve_store(w.master_port);
  store::StoreClient::Options o;
  o.host = w.master_addr;
  o.port = w.master_port;
  o.timeout = timeout;
  o.protocol = store::Protocol::modern;
  try {
    link.client = store::StoreClient::connect(o);
  } catch (const store::StoreError& e) {
    throw CollectiveError("rank " + std::to_string(w.rank) + " cannot reach the store at MASTER_ADDR=" +
                          w.master_addr + " MASTER_PORT=" + std::to_string(w.master_port) + ": " + e.what());
  }
  return link;
}

int next_instance(const WorkerEnv& w, const std::string& group) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int, int, std::string, int>, int> counts;
  std::lock_guard lock(mu);
  return counts[{w.master_addr, w.master_port, w.restart_count, group, w.rank}]++;
}

std::string choose_bind_address(const Options& options, const BootstrapEnv& env,
                                const store::StoreClient& client, bool* is_interface) {
  *is_interface = false;
  if (!options.bind_address.empty()) return options.bind_address;
  if (!env.socket_ifname.empty()) {
    *is_interface = true;
    return env.socket_ifname;
  }
  std::string local = client.local_address();
  if (local.empty()) throw CollectiveError("the store connection has no local address to bind Gloo to");
  return local;
}

}  // namespace cxxrun::worker
