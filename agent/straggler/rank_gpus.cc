#include "agent/straggler/rank_gpus.h"

namespace cxxrun::agent {
namespace {

std::vector<std::string> entries(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (int guard = 0; guard < 4096 && start <= list.size(); ++guard) {
    const std::size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string RankGpus::of(int local_rank) const {
  if (local_rank < 0) return "";
  if (!per_rank.empty()) {
    if (local_rank >= static_cast<int>(per_rank.size())) return "";
    const auto own = entries(per_rank[local_rank]);
    return own.empty() ? "" : own.front();
  }
  if (!cuda_visible_devices) return std::to_string(local_rank);
  if (cuda_visible_devices->empty()) return "";
  const auto list = entries(*cuda_visible_devices);
  // CUDA reads the list up to the first entry that names no GPU; an empty
  // entry is such an end.
  return local_rank < static_cast<int>(list.size()) ? list[local_rank] : "";
}

RankGpus RankGpus::from(const Config& config, const std::optional<std::string>& agent_cuda_visible_devices) {
  RankGpus g;
  g.per_rank = config.visible_devices;
  if (const auto it = config.extra_env.find("CUDA_VISIBLE_DEVICES"); it != config.extra_env.end())
    g.cuda_visible_devices = it->second;
  else
    g.cuda_visible_devices = agent_cuda_visible_devices;
  return g;
}

}  // namespace cxxrun::agent
