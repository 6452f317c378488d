#include "agent/process/worker_env_writer.h"

#include <unistd.h>

#include "common/env_names.h"

extern char** environ;

namespace cxxrun::agent {

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

EnvMap worker_environment(const Config& c, const WorkerPlace& p, const EnvMap& base) {
  EnvMap env = base;
  for (const auto& [k, v] : c.extra_env) env[k] = v;
  const int local_world = c.nproc_per_node;
  env[env::kLocalRank] = std::to_string(p.local_rank);
  // --virtual-local-rank: each worker's one GPU is its device 0.
  if (!c.visible_devices.empty()) {
    env[env::kLocalRank] = "0";
    env["CUDA_VISIBLE_DEVICES"] = c.visible_devices.at(p.local_rank);
  }
  env[env::kRank] = std::to_string(p.rank);
  env[env::kGroupRank] = std::to_string(p.group_rank);
  env[env::kRoleRank] = std::to_string(p.rank);
  env[env::kRoleName] = c.role;
  env[env::kLocalWorldSize] = std::to_string(local_world);
  env[env::kWorldSize] = std::to_string(p.world_size);
  env[env::kGroupWorldSize] = std::to_string(p.group_world_size);
  env[env::kRoleWorldSize] = std::to_string(p.world_size);
  env[env::kMasterAddr] = p.master_addr;
  env[env::kMasterPort] = std::to_string(p.master_port);
  env[env::kRestartCount] = std::to_string(p.restart_count);
  env[env::kMaxRestarts] = std::to_string(c.max_restarts);
  env[env::kRunId] = c.run_id;
  // Python's str(bool): torch compares against the literal "True".
  env[env::kUseAgentStore] = c.use_agent_store ? "True" : "False";
  env[env::kErrorFile] = p.error_file;
  if (!env.count(env::kNcclAsyncErrorHandling)) env[env::kNcclAsyncErrorHandling] = "1";
  env[env::kJobToken] = p.job_token;
  return env;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> substitute_local_rank(const std::vector<std::string>& args, int local_rank) {
  static const std::string macro = "${local_rank}";
  const std::string value = std::to_string(local_rank);
  std::vector<std::string> out;
  out.reserve(args.size());
  for (std::string a : args) {
    for (auto pos = a.find(macro); pos != std::string::npos; pos = a.find(macro, pos + value.size()))
      a.replace(pos, macro.size(), value);
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace cxxrun::agent
