#include "rendezvous/etcd_job_store.h"

#include <spdlog/spdlog.h>

#include "etcd/client.h"

namespace cxxrun::rendezvous {

EtcdJobStore::EtcdJobStore(const RendezvousSettings& settings)
    : settings_(settings),
      store_(settings.etcd, settings.read_timeout),
      liveness_(settings, settings.etcd.prefix + "/") {
  try {
    // One read: a wrong endpoint or certificate is one clear line now, not
    // a join that times out later.
    store_.check({"cxxrun/rdzv/" + settings.run_id + "/config"});
  } catch (const store::StoreError& e) {
    throw RendezvousError(std::string("cannot reach the etcd cluster: ") + e.what());
  }
  spdlog::info("rendezvous through etcd at {} (prefix {})", settings.endpoint, settings.etcd.prefix);
}

std::unique_ptr<store::StoreClient> EtcdJobStore::connect_another(std::chrono::milliseconds timeout) const {
  return std::make_unique<EtcdStore>(settings_.etcd, timeout);
}

void EtcdJobStore::leave(bool, int members, const std::function<void()>& first) {
  try {
    if (first) first();
    // The job's keys outlive its agents in etcd: the last member to leave
    // removes them, so the run id can be used again. (Not a spare: it
    // belongs to no round's count.)
    const std::string job = "cxxrun/rdzv/" + settings_.run_id + "/";
    if (members > 0 && store_.add(job + "left", 1) >= members) {
      store_.client().delete_prefix(store_.etcd_key(job));
      spdlog::info("the job's rendezvous keys are removed from etcd");
    }
  } catch (const std::exception& e) {
    spdlog::warn("cannot tell the other nodes this node left: {}", e.what());
  }
  liveness_.release();
}

}  // namespace cxxrun::rendezvous
