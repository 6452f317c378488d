#include "rendezvous/backends.h"

#include "rendezvous/c10d_backend.h"
#include "rendezvous/etcd_job_store.h"
#include "rendezvous/job_store.h"
#include "rendezvous/local_backend.h"
#include "rendezvous/static_backend.h"

namespace cxxrun::rendezvous {

std::unique_ptr<Rendezvous> make_rendezvous(const RendezvousConfig& config, const WorkerStorePlan& workers) {
  switch (config.backend) {
    case Backend::local: return std::make_unique<LocalBackend>(workers);
    case Backend::static_tcp: return std::make_unique<StaticBackend>(config, workers);
    case Backend::c10d:
      return std::make_unique<C10dBackend>(config, workers,
                                           [](const RendezvousConfig& c) { return std::make_unique<JobStore>(c); });
    case Backend::etcd:
      return std::make_unique<C10dBackend>(config, workers,
                                           [](const RendezvousConfig& c) {
                                             return std::make_unique<EtcdJobStore>(c.settings);
                                           });
  }
  return nullptr;
}

}  // namespace cxxrun::rendezvous
