#include "rendezvous/static_backend.h"

#include <spdlog/spdlog.h>

#include "net/endpoint.h"

namespace cxxrun::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds time_left_until(Clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

}  // namespace

Assignment StaticBackend::join() {
  const RendezvousConfig& r = config_;
  store_ = std::make_unique<JobStore>(r);
  store::StoreClient& client = store_->client();
  const std::string where = net::format_endpoint({r.host, r.port});
  const std::string prefix = "cxxrun/static/" + r.settings.run_id + "/node/";
  client.set(prefix + std::to_string(r.node_rank), std::to_string(plan_.nproc_per_node));
  const auto deadline = Clock::now() + r.settings.static_timeout;
  std::vector<std::string> keys;
  for (int i = 0; i < r.nnodes; ++i) keys.push_back(prefix + std::to_string(i));
  for (;;) {
    try {
      client.wait(keys, std::min(time_left_until(deadline), r.settings.progress_interval));
      break;
    } catch (const store::StoreTimeout&) {
      int joined = 0;
      for (const auto& k : keys) joined += client.check({k});
      if (Clock::now() >= deadline)
        throw RendezvousError("timed out waiting for static rendezvous job=" + r.settings.run_id + " at " + where +
                              ": " + std::to_string(joined) + "/" + std::to_string(r.nnodes) + " nodes joined");
      spdlog::info("waiting for rendezvous job={} at {}: {}/{} nodes", r.settings.run_id, where, joined, r.nnodes);
    }
  }
  Assignment a;
  a.group_rank = r.node_rank;
  a.group_world_size = r.nnodes;
  a.world_size = 0;
  for (int i = 0; i < r.nnodes; ++i) {
    const int nproc = std::stoi(client.get(keys[i]));
    if (i < r.node_rank) a.base_rank += nproc;
    a.world_size += nproc;
  }
  // The workers share the rendezvous store (the MASTER_PORT rule,
  // rendezvous/worker_store.h).
  a.master_addr = plan_.addr;
  a.master_port = plan_.port;
  assignment_ = a;
  return a;
}

void StaticBackend::leave(bool succeeded) {
  if (store_) store_->leave(succeeded, config_.nnodes);
}

}  // namespace cxxrun::rendezvous
