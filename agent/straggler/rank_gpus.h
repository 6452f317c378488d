// Which GPU each local rank computes on, as the sampler guesses it without
// asking the program: the entry of CUDA_VISIBLE_DEVICES (as the workers get
// it) at the rank's local rank, the rank's own one device under
// --virtual-local-rank, and GPU i for local rank i when the variable is not
// set: the convention torch's examples follow (cuda:LOCAL_RANK).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/config.h"

namespace cxxrun::agent {

struct RankGpus {
  // The workers' CUDA_VISIBLE_DEVICES; nullopt: not set (every GPU, in NVML's order).
  std::optional<std::string> cuda_visible_devices;
  // --virtual-local-rank: local rank i sees only per_rank[i] (Config::visible_devices).
  std::vector<std::string> per_rank;

  // The GPU of `local_rank`, named as CUDA_VISIBLE_DEVICES names one ("3",
  // "GPU-..."); "" when it has none (the list is empty or shorter).
  std::string of(int local_rank) const;

  // What `config` gives the workers: --virtual-local-rank's devices, else
  // CUDA_VISIBLE_DEVICES from the workers' extra environment, else
  // `agent_cuda_visible_devices` (the agent's own, which workers inherit).
  static RankGpus from(const Config& config, const std::optional<std::string>& agent_cuda_visible_devices);
};

}  // namespace cxxrun::agent
