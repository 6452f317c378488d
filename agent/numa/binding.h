// --numa-binding: which CPUs (and, for node, which memory) each local rank
// gets, with the rules of torch's torch/numa/binding.py. Local rank L drives
// GPU L of the agent's CUDA view (CUDA_VISIBLE_DEVICES[L] when set), and is
// bound near that GPU's NUMA node:
//   node          every allowed CPU of the node; memory bound to the node
//   socket        every allowed CPU of every NUMA node of the node's package
//   exclusive     the node's physical cores (allowed CPUs grouped by core,
//                 in order of their lowest CPU) split evenly among the GPUs
//                 on that node, the lowest GPU indices taking one extra
//                 core each when they do not divide
//   core-complex  one group of the node's allowed CPUs that share a
//                 last-level cache, picked round robin by the GPU's place
//                 among the node's GPUs (groups ordered by size, largest
//                 first, then by their lowest CPU)
// "Allowed" means also in the agent's own affinity (sched_getaffinity).
// Every refusal is a NumaBindingError whose message is one line.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "agent/numa/placement.h"
#include "agent/numa/topology.h"

namespace cxxrun::agent {

enum class NumaMode { node, socket, exclusive, core_complex };

// "node", "socket", "exclusive", "core-complex"; nullopt for anything else.
std::optional<NumaMode> numa_mode_named(std::string_view name);

class NumaBindingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NumaRequest {
  NumaMode mode = NumaMode::node;
  int nproc_per_node = 1;
  // The agent's CUDA_VISIBLE_DEVICES; nullopt: unset (every GPU, in order).
  // Integer indices only: a UUID (GPU-..., MIG-...) cannot be matched to a
  // PCI device without NVML, and is refused.
  std::optional<std::string> cuda_visible_devices;
  std::vector<int> agent_cpus;  // the agent's affinity: agent_affinity()
};

// One placement per local rank, 0..nproc_per_node-1. Throws NumaBindingError.
std::vector<NumaPlacement> plan_numa_binding(const NumaTopology& host, const NumaRequest& request);

// The CPUs this process may run on (sched_getaffinity).
std::vector<int> agent_affinity();

// "0-3,8,10-11": the kernel's cpulist format.
std::string cpu_list_text(const std::vector<int>& cpus);

// The agent's line for a bound worker: "local rank 3: bound to CPUs 24-31
// and memory of NUMA node 1 (near GPU 3, 0000:3b:00.0)".
std::string describe_binding(int local_rank, const NumaPlacement& placement);

}  // namespace cxxrun::agent
