// What the agent is told to run. The launcher builds this from argv and the
// environment; the agent never sees argv. All values are already validated.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cxxrun::agent {

// torchrun's Std flag: which of a worker's streams go to a file.
enum class Std : unsigned { none = 0, out = 1, err = 2, all = 3 };

inline bool has(Std set, Std bit) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(bit)) != 0;
}

// "--redirects 3" (all ranks) or "--redirects 0:1,2:3" (per local rank; the
// ranks not named get none).
struct StdSpec {
  Std all = Std::none;
  std::map<int, Std> per_rank;
  bool per_rank_given = false;

  Std for_rank(int local_rank) const {
    if (!per_rank_given) return all;
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? Std::none : it->second;
  }
};

struct Config {
  // Worker argv; each element may hold the "${local_rank}" macro.
  std::vector<std::string> command;
  // Name shown in the failure summary (script path or binary).
  std::string entrypoint_name;

  int nproc_per_node = 1;
  int max_restarts = 0;
  std::string run_id = "none";
  std::string role = "default";

  // This node's place in the job. Single node: rank 0 of 1.
  int group_rank = 0;
  int group_world_size = 1;

  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool use_agent_store = false;

  // Base log directory. Empty: a fresh temp dir, removed at exit.
  // "/dev/null": no log files and no error files.
  std::string log_dir;
  StdSpec redirects;
  StdSpec tee;
  // Local ranks whose console output is shown; empty = all.
  std::set<int> local_ranks_filter;
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; empty = "[${role_name}${local_rank}]:".
  std::string log_line_prefix_template;

  // Signals forwarded to every worker's process group. Those that end a
  // job (TERM, INT, HUP, QUIT) also stop the agent after forwarding.
  std::vector<int> signals_to_handle;
  // Grace between SIGTERM and SIGKILL when stopping workers.
  std::chrono::milliseconds shutdown_timeout{30000};

  // Set in every worker's environment on top of the agent's own.
  std::map<std::string, std::string> extra_env;
};

}  // namespace cxxrun::agent
