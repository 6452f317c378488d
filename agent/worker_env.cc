#include "agent/worker_env.h"

#include <unistd.h>

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
  env["LOCAL_RANK"] = std::to_string(p.local_rank);
  env["RANK"] = std::to_string(p.rank);
  env["GROUP_RANK"] = std::to_string(c.group_rank);
  env["ROLE_RANK"] = std::to_string(p.rank);
  env["ROLE_NAME"] = c.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
  env["WORLD_SIZE"] = std::to_string(p.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(c.group_world_size);
  env["ROLE_WORLD_SIZE"] = std::to_string(p.world_size);
  env["MASTER_ADDR"] = c.master_addr;
  env["MASTER_PORT"] = std::to_string(c.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(p.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(c.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = c.run_id;
  // Python's str(bool): torch compares against the literal "True".
  env["TORCHELASTIC_USE_AGENT_STORE"] = c.use_agent_store ? "True" : "False";
  env["TORCHELASTIC_ERROR_FILE"] = p.error_file;
  if (!env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING")) env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  env["CXXRUN_JOB_TOKEN"] = p.job_token;
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
