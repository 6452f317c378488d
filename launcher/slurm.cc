#include "launcher/slurm.h"

#include <netdb.h>
#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "launcher/hostlist.h"
#include "launcher/values.h"
#include "rendezvous/rendezvous.h"
#include "store/wire.h"

namespace cxxrun::launcher {
namespace {

// Bounds `scontrol show node` on a slow controller.
constexpr int kScontrolSeconds = 10;

std::optional<RawValue> var(const Env& env, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto it = env.find(name); it != env.end() && !it->second.empty()) return RawValue{it->second, name};
  return std::nullopt;
}

int count(const RawValue& v, int min) {
  auto n = integer_of(v.text);
  if (!n || *n < min || *n > 1000000)
    throw UsageError(fmt::format("{}: Slurm should have set a whole number >= {} here", v.shown(), min));
  return static_cast<int>(*n);
}

// SLURM_GPUS_ON_NODE is a count; SLURM_STEP_GPUS and SLURM_JOB_GPUS list
// the GPU indices given to the step or job on this node.
std::optional<std::pair<int, RawValue>> gpus(const Env& env) {
  if (auto on_node = var(env, {"SLURM_GPUS_ON_NODE"})) {
    const int n = count(*on_node, 0);
    return n > 0 ? std::optional(std::pair(n, *on_node)) : std::nullopt;
  }
  if (auto list = var(env, {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}))
    return std::pair(static_cast<int>(std::count(list->text.begin(), list->text.end(), ',')) + 1, *list);
  return std::nullopt;
}

bool user_chose_the_layout(const RawOptions& raw) {
  if (raw.flag("standalone") || raw.flag("no_slurm")) return true;
  for (const char* dest : {"nnodes", "master_addr", "node_rank"})
    if (raw.was_given(dest)) return true;
  // "--rdzv-endpoint=:PORT" picks only the port.
  return raw.was_given("rdzv_endpoint") && !raw.at("rdzv_endpoint").text.starts_with(":");
}

int endpoint_port(const RawOptions& raw) {
  if (!raw.was_given("rdzv_endpoint")) return rendezvous::kDefaultC10dPort;
  const RawValue& v = raw.at("rdzv_endpoint");
  auto port = integer_of(v.text.substr(1));
  if (!port || *port < 1 || *port > 65535)
    throw UsageError(v.shown() + ": under Slurm, ':PORT' picks the rendezvous port (1..65535)");
  return static_cast<int>(*port);
}

std::string run_command(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace

NodeAddress resolve_node_address() {
  return [](const std::string& name) {
    addrinfo* found = nullptr;
    if (getaddrinfo(name.c_str(), nullptr, nullptr, &found) == 0) {
      freeaddrinfo(found);
      return name;
    }
    // Node names come from Slurm's host list: letters, digits, '-', '.', '_'.
    const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
    });
    if (!plain) return name;
    const std::string out = run_command(fmt::format("timeout {} scontrol show node -o {} 2>/dev/null",
                                                    kScontrolSeconds, name));
    const auto at = out.find("NodeAddr=");
    if (at == std::string::npos) return name;
    const auto end = out.find_first_of(" \n", at);
    return out.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
  };
}

std::optional<std::string> apply_slurm(RawOptions& raw, const Env& env, const NodeAddress& address) {
  const auto job = var(env, {"SLURM_JOB_ID"});
  const auto step = var(env, {"SLURM_STEP_ID"});
  if (!job || !step || user_chose_the_layout(raw)) return std::nullopt;

  const auto nodes_var = var(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
  const auto node_id = var(env, {"SLURM_NODEID"});
  const auto list = var(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodes_var || !node_id || !list)
    throw UsageError("a Slurm step without SLURM_STEP_NUM_NODES, SLURM_NODEID or SLURM_STEP_NODELIST: run "
                     "cxxrun through srun, or pass --nnodes and --rdzv-endpoint (or --no-slurm)");
  const int nodes = count(*nodes_var, 1);
  const int node = count(*node_id, 0);
  if (node >= nodes) throw UsageError(fmt::format("{}: must be below {}", node_id->shown(), nodes_var->shown()));
  if (auto tasks = var(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}); tasks && count(*tasks, 1) > nodes) {
    const auto per_node = var(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
    throw UsageError(fmt::format("{} with {}{}: one cxxrun runs per node and starts the workers itself; launch "
                                 "it with srun --ntasks-per-node=1",
                                 tasks->shown(), nodes_var->shown(), per_node ? " (" + per_node->shown() + ")" : ""));
  }
  std::vector<std::string> hosts;
  try {
    hosts = expand_hostlist(list->text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", list->shown(), e.what()));
  }
  const std::string host = address(hosts.front());

  const std::string nodes_text = std::to_string(nodes);
  const bool c10d = !raw.was_given("rdzv_backend") || raw.at("rdzv_backend").text == "c10d";
  std::string where;
  raw.values["nnodes"] = {nodes_text, nodes_var->origin};
  if (c10d) {
    const int port = endpoint_port(raw);
    raw.values["rdzv_backend"] = {"c10d", "SLURM_JOB_ID"};
    raw.values["rdzv_endpoint"] = {fmt::format("{}:{}", host, port), list->origin};
    // c10d ranks nodes itself; this puts group rank 0 on Slurm's first node.
    raw.values["node_order"] = {std::to_string(node), node_id->origin};
    where = fmt::format("rendezvous c10d at {}:{}", host, port);
  } else {
    raw.values["node_rank"] = {std::to_string(node), node_id->origin};
    raw.values["master_addr"] = {host, list->origin};
    const RawValue* port = raw.find("master_port");
    where = fmt::format("static rendezvous at {}:{}", host, port != nullptr ? port->text : std::to_string(store::wire::kDefaultPort));
  }
  if (!raw.was_given("rdzv_id"))
    raw.values["rdzv_id"] = {fmt::format("slurm-{}.{}", job->text, step->text), "SLURM_JOB_ID"};
  std::string workers;
  if (!raw.was_given("nproc_per_node"))
    if (auto g = gpus(env)) {
      raw.values["nproc_per_node"] = {std::to_string(g->first), g->second.origin};
      workers = fmt::format(", {} workers ({})", g->first, g->second.shown());
    }
  std::string signals;
  if (!raw.was_given("signals_to_handle")) {
    RawValue& s = raw.values["signals_to_handle"];
    s.text += ",SIGUSR1";
    // A preemption warning, not an order to stop: the workers decide.
    raw.values["signals_forward_only"] = {"SIGUSR1", "SLURM_JOB_ID"};
    signals = ", SIGUSR1 forwarded to workers (srun --signal=USR1@N)";
  }
  return fmt::format("Slurm job {} step {}: node {} of {}, {} (run id {}){}{}; flags you give win, --no-slurm "
                     "turns this off",
                     job->text, step->text, node, nodes, where, raw.at("rdzv_id").text, workers, signals);
}

}  // namespace cxxrun::launcher
