// What `cxxrun --hostfile=FILE` / `--hosts=h1,h2` starts (docs/multi-host.md):
// one agent per host through --rsh, each a cxxrun told everything on its
// command line. This is where the launcher decides that command: the user's
// options (their PET_* values written out as flags, since the remote login
// has its own environment), --nnodes from the hosts, the c10d rendezvous on
// the first host, a fresh run id, each host's slots, and the token that
// travels on stdin. Plain values; the loop that runs it is launcher/fanout.h.
#pragma once

#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace cxxrun::launcher {

struct RawOptions;  // launcher/raw_options.h

// The default --rsh, as rsync's: no password prompt can hang the launch.
inline constexpr const char* kDefaultRsh = "ssh -o BatchMode=yes";

struct FanoutPlan {
  std::vector<Host> hosts;
  std::vector<std::string> rsh;  // --rsh split as a shell would
  // Per host: the remote cxxrun's words, unquoted (fanout.cc quotes each for
  // the remote shell).
  std::vector<std::vector<std::string>> commands;
  // The rendezvous store's secret, the first line of every agent's stdin;
  // empty: none (etcd, a store outside the job, or the user's token_file).
  std::string token;
  int min_nodes = 1;
  int max_nodes = 1;
  // The launcher chose the endpoint: the first host's agent hosts the store,
  // so the job cannot go on without it.
  bool first_host_is_store = false;
  // Seconds an agent may take to stop once told to (its --shutdown-timeout
  // and --kill-timeout, and a margin): then its --rsh is killed.
  double stop_deadline_s = 70;
  // For the launcher's first log line.
  std::string endpoint;
  std::string run_id;
};

// Whether the command line asks for a one-command job (--hostfile, --hosts
// or their PET_* variables).
bool wants_fanout(const RawOptions& raw);

// `self`: the path the remote hosts run unless --remote-cxxrun says. Throws
// UsageError (exit 2) for a bad host list, --rsh, or options that cannot be
// spread over hosts (--standalone, the static backend, --from-launcher).
FanoutPlan plan_fanout(const RawOptions& raw, const std::string& self);

// The rsh words for host `i`: CMD... HOST COMMAND..., each command word
// quoted for the remote shell.
std::vector<std::string> rsh_argv(const FanoutPlan& plan, size_t i);

}  // namespace cxxrun::launcher
