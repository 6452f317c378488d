#include "rendezvous/local_backend.h"

namespace cxxrun::rendezvous {

Assignment LocalBackend::join() {
  Assignment a;
  a.world_size = plan_.nproc_per_node;
  a.master_addr = plan_.addr;
  a.master_port = workers_.settle(plan_.agent_serves, bind_host_for(plan_.addr), plan_.addr, plan_.port);
  return a;
}

}  // namespace cxxrun::rendezvous
