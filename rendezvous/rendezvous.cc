#include "rendezvous/rendezvous.h"

#include "rendezvous/c10d_backend.h"
#include "rendezvous/etcd_job_store.h"
#include "rendezvous/job_store.h"
#include "rendezvous/local_backend.h"
#include "rendezvous/static_backend.h"

namespace cxxrun::rendezvous {

std::string_view to_string(RoundEvent e) {
  switch (e) {
    case RoundEvent::none: return "";
    case RoundEvent::abort: return "abort";
    case RoundEvent::join: return "join";
    case RoundEvent::dead: return "dead";
    case RoundEvent::done: return "done";
  }
  return "";
}

RoundEvent parse_round_event(std::string_view text) {
  for (RoundEvent e : {RoundEvent::abort, RoundEvent::join, RoundEvent::dead, RoundEvent::done})
    if (text == to_string(e)) return e;
  return RoundEvent::none;
}

std::unique_ptr<Rendezvous> make_rendezvous(const RendezvousConfig& config, const WorkerStorePlan& workers) {
  switch (config.backend) {
    case Backend::local: return std::make_unique<LocalBackend>(workers);
    case Backend::static_tcp: return std::make_unique<StaticBackend>(config, workers);
    case Backend::c10d:
      return std::make_unique<C10dBackend>(config, workers, [config] { return std::make_unique<JobStore>(config); });
    case Backend::etcd:
      return std::make_unique<C10dBackend>(config, workers,
                                           [config] { return std::make_unique<EtcdJobStore>(config.settings); });
  }
  return nullptr;
}

}  // namespace cxxrun::rendezvous
