#include "launcher/kubeflow.h"

#include <charconv>

#include <fmt/format.h>

namespace cxxrun::launcher {
namespace {

// More than one node: "N" or "MIN:MAX" with a maximum above 1. Text that is
// not a count is left for build_config to refuse.
bool across_nodes(const std::string& nnodes) {
  const std::string max = nnodes.substr(nnodes.find(':') + 1);
  int n = 0;
  auto [end, ec] = std::from_chars(max.data(), max.data() + max.size(), n);
  return ec == std::errc() && end == max.data() + max.size() && n > 1;
}

const std::string* nonempty(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::string> apply_master_env(RawOptions& raw, const Env& env) {
  if (raw.flag("standalone") || raw.at("rdzv_backend").text != "static") return std::nullopt;
  if (!across_nodes(raw.at("nnodes").text)) return std::nullopt;
  if (raw.was_given("master_addr") || raw.was_given("rdzv_endpoint")) return std::nullopt;
  const std::string* addr = nonempty(env, "MASTER_ADDR");
  if (addr == nullptr) return std::nullopt;
  raw.values["master_addr"] = {*addr, "MASTER_ADDR"};
  std::string port;
  if (const std::string* p = nonempty(env, "MASTER_PORT"); p != nullptr && !raw.was_given("master_port")) {
    raw.values["master_port"] = {*p, "MASTER_PORT"};
    port = fmt::format(" and --master-port={} from MASTER_PORT", *p);
  }
  return fmt::format(
      "--master-addr={} from MASTER_ADDR{} (a Kubeflow PyTorchJob sets these, not PET_MASTER_ADDR); give "
      "--master-addr to choose another",
      *addr, port);
}

}  // namespace cxxrun::launcher
