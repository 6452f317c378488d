// Which rendezvous a single-node cxxrun job uses, and where its workers'
// store lives (MASTER_ADDR/MASTER_PORT, TORCHELASTIC_RUN_ID).
#pragma once

#include <string>
#include <vector>

#include "launcher/raw_options.h"

namespace cxxrun::launcher {

struct RendezvousChoice {
  std::string run_id;
  std::string master_addr;
  int master_port = 0;
};

// --standalone (or c10d on a local endpoint): a fresh free port on 127.0.0.1,
// so two jobs on one host never clash. static: --master-addr/--master-port
// (or --rdzv-endpoint), which must be free now because worker rank 0 will
// listen there. Calls check_rendezvous_supported first.
RendezvousChoice choose_rendezvous(const RawOptions& raw, std::vector<std::string>& warnings,
                                   std::vector<std::string>& notes);

// Refuses etcd, unknown backends, and c10d on an endpoint that is not this
// host (multi-node, not built yet). Cheap: no sockets.
void check_rendezvous_supported(const RawOptions& raw);

// A random (version 4) UUID: 8-4-4-4-12 lowercase hex.
std::string random_uuid4();

}  // namespace cxxrun::launcher
