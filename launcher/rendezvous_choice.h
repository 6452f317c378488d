// How this node meets the others (agent::Config::rdzv), and where its
// workers' store lives (MASTER_ADDR/MASTER_PORT, TORCHELASTIC_RUN_ID):
//   --standalone           Backend::local, a fresh uuid and a free port on
//                          127.0.0.1 (or --local-addr), so two jobs on one
//                          host never clash.
//   static, --nnodes=1,    the same (torch main's default): a free port and
//   no port, no endpoint   a fresh uuid, unless --rdzv-id names the run.
//   static, --nnodes=1     Backend::local on --master-addr/--master-port (or
//                          --rdzv-endpoint), where the agent serves the
//                          workers' store; a port taken by then is exit 2.
//   static, --nnodes=N>1   Backend::static_tcp: node 0's agent hosts the store
//                          on the master port; --node-rank is this node's rank.
//   c10d                   Backend::c10d through the store at --rdzv-endpoint
//                          (port 29400 by default); the rendezvous decides
//                          group ranks and MASTER_ADDR/MASTER_PORT.
#pragma once

#include <string>
#include <vector>

#include "agent/config.h"
#include "launcher/errors.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Cheap checks, no sockets: the backend is known and supported, --nnodes and
// --node-rank fit it, a c10d endpoint is given and well formed.
void check_rendezvous_supported(const RawOptions& raw);

// --rdzv-conf into rdzv.settings (timeouts) and rdzv.is_host. Every backend
// validates it: unknown keys and bad values are UsageErrors.
void apply_rdzv_conf_option(const RawValue& value, rendezvous::RendezvousConfig& rdzv);

// Fills config.rdzv (all but what apply_rdzv_conf_option set), run_id,
// master_addr/master_port, group_rank/group_world_size and use_agent_store.
// Reads config.nproc_per_node and config.entrypoint_name, so call it after
// those are set. Calls check_rendezvous_supported first.
void choose_rendezvous(const RawOptions& raw, agent::Config& config, std::vector<std::string>& warnings,
                       std::vector<std::string>& notes);

// A random (version 4) UUID: 8-4-4-4-12 lowercase hex.
std::string random_uuid4();

}  // namespace cxxrun::launcher
