// What `cxxrun --hostfile=FILE` / `--hosts=h1,h2` starts (docs/multi-host.md):
// one agent per host through --rsh, each a cxxrun told everything on its
// command line. Plain values, made by launcher/fanout_options.h and run by
// launcher/fanout.h; below the parse's Parsed (launcher/parsed.h).
#pragma once

#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace cxxrun::launcher {

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
  // --token-out: where this machine keeps the token for cxxrunctl; empty: nowhere.
  std::string token_out;
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

// The rsh words for host `i`: CMD... HOST COMMAND..., each command word
// quoted for the remote shell.
std::vector<std::string> rsh_argv(const FanoutPlan& plan, size_t i);

}  // namespace cxxrun::launcher
