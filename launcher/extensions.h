// cxxrun's own options (observability, hang detection, fault injection, the
// workers' terminal) and the environment variables that go with them:
// --event-log, --health-port/--health-host, --heartbeat-timeout,
// --section-timeout, --stack-dump-signal, --inject-fault, --tty;
// TORCHELASTIC_HEALTH_CHECK_PORT, TORCHELASTIC_ENABLE_FILE_TIMER/
// TORCHELASTIC_TIMER_FILE, CXXRUN_INJECT_FAULTS, CXXRUN_TTY.
#pragma once

#include <string>
#include <vector>

#include "agent/config.h"
#include "launcher/environment.h"
#include "launcher/errors.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Validates them and fills the matching Config fields. Throws UsageError
// naming the value and the rule.
void apply_extensions(const RawOptions& raw, const Env& env, agent::Config& config,
                      std::vector<std::string>& warnings);

// The health server binds when the agent starts, and a failure there would be
// exit 1 after the job's store is up: check here that config.health_host is
// an address of this machine and config.health_port (unless 0) is free on it.
void check_health_endpoint(const RawOptions& raw, const Env& env, const agent::Config& config);

// --node-group (PET_NODE_GROUP), else the switch Slurm's topology puts this
// node under (SLURM_TOPOLOGY_ADDR less its last part); "" for none.
std::string node_group(const RawOptions& raw, const Env& env);

// One fault spec ("kill:rank=1,after=500"), the syntax above agent::FaultSpec.
agent::FaultSpec parse_fault_spec(const RawValue& value);
// Every spec from --inject-fault (each may hold several, ';'-separated), then
// those in CXXRUN_INJECT_FAULTS.
std::vector<agent::FaultSpec> parse_faults(const RawOptions& raw, const Env& env);

// What a fault may target: worker ranks below nproc_per_node x max_nodes,
// node ranks below max_nodes, attempts up to max_restarts.
struct JobBounds {
  int nproc_per_node = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  std::string max_restarts_value;  // "--max-restarts=0", for messages
};
// Throws UsageError naming the spec whose target this job can never have.
void check_fault_targets(const RawOptions& raw, const Env& env, const JobBounds& job);

}  // namespace cxxrun::launcher
