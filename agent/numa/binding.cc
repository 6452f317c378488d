#include "agent/numa/binding.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The host indices of the GPUs CUDA shows the agent, in CUDA's order. As the
// CUDA runtime does, the list ends at the first entry that is not a new
// index of an existing GPU.
std::vector<int> visible_gpus(const std::optional<std::string>& cuda_visible_devices, int physical) {
  std::vector<int> out;
  if (!cuda_visible_devices) {
    for (int i = 0; i < physical; ++i) out.push_back(i);
    return out;
  }
  std::string_view rest = *cuda_visible_devices;
  for (bool more = !rest.empty(); more;) {
    const auto comma = rest.find(',');
    more = comma != std::string_view::npos;
    const std::string_view item = trimmed(rest.substr(0, comma));
    rest = more ? rest.substr(comma + 1) : std::string_view{};
    if (item.starts_with("GPU-") || item.starts_with("MIG-"))
      throw NumaBindingError(fmt::format(
          "CUDA_VISIBLE_DEVICES={}: {} is a UUID, which cxxrun cannot match to a PCI device (that needs NVML); "
          "name the GPUs by index, e.g. CUDA_VISIBLE_DEVICES=0,1",
          *cuda_visible_devices, item));
    int index = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    const bool valid = !item.empty() && ec == std::errc() && end == item.data() + item.size() && index >= 0 &&
                       index < physical && std::find(out.begin(), out.end(), index) == out.end();
    if (!valid) break;
    out.push_back(index);
  }
  return out;
}

std::vector<int> intersection(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

const NumaTopology::Node& node_named(const NumaTopology& host, int os_index) {
  for (const auto& n : host.nodes)
    if (n.os_index == os_index) return n;
  throw NumaBindingError(fmt::format("hwloc places a GPU on NUMA node {}, which it does not list", os_index));
}

// Groups `cpus` by `key_of` (each group named by its key, ascending).
std::map<int, std::vector<int>> grouped(const std::vector<int>& cpus, const std::map<int, int>& key_of) {
  std::map<int, std::vector<int>> out;
  for (int cpu : cpus) {
    const auto it = key_of.find(cpu);
    out[it == key_of.end() ? cpu : it->second].push_back(cpu);
  }
  return out;
}

class Planner {
 public:
  Planner(const NumaTopology& host, const NumaRequest& r) : host_(host), r_(r) {
    agent_cpus_ = r.agent_cpus;
    std::sort(agent_cpus_.begin(), agent_cpus_.end());
    agent_cpus_.erase(std::unique(agent_cpus_.begin(), agent_cpus_.end()), agent_cpus_.end());
  }

  std::vector<NumaPlacement> plan() {
    if (host_.gpus.empty()) throw NumaBindingError("this host has no NVIDIA GPU to bind near");
    visible_ = visible_gpus(r_.cuda_visible_devices, static_cast<int>(host_.gpus.size()));
    if (r_.nproc_per_node > static_cast<int>(visible_.size()))
      throw NumaBindingError(fmt::format(
          "{} local workers need {} GPUs to bind near, one each, and {} {}", r_.nproc_per_node, r_.nproc_per_node,
          r_.cuda_visible_devices ? "CUDA_VISIBLE_DEVICES=" + *r_.cuda_visible_devices + " shows" : "this host has",
          r_.cuda_visible_devices ? fmt::format("{} of this host's {}", visible_.size(), host_.gpus.size())
                                  : std::to_string(visible_.size())));
    std::vector<NumaPlacement> out;
    for (int local_rank = 0; local_rank < r_.nproc_per_node; ++local_rank) out.push_back(place(local_rank));
    return out;
  }

 private:
  NumaPlacement place(int local_rank) {
    NumaPlacement p;
    p.gpu = visible_[local_rank];
    p.gpu_pci = host_.gpus[p.gpu].pci_bus_id;
    p.numa_node = host_.gpus[p.gpu].numa_node;
    const std::vector<int> near = allowed(p.numa_node);
    if (near.empty())
      throw NumaBindingError(fmt::format("none of NUMA node {}'s CPUs ({}), near GPU {} ({}), is in cxxrun's own "
                                         "affinity ({})",
                                         p.numa_node, cpu_list_text(node_named(host_, p.numa_node).cpus), p.gpu,
                                         p.gpu_pci, cpu_list_text(agent_cpus_)));
    switch (r_.mode) {
      case NumaMode::node:
        p.cpus = near;
        p.memory_node = p.numa_node;
        break;
      case NumaMode::socket:
        p.cpus = socket_cpus(near);
        break;
      case NumaMode::exclusive:
        p.cpus = exclusive_cpus(local_rank, p.numa_node, near);
        break;
      case NumaMode::core_complex:
        p.cpus = core_complex_cpus(local_rank, p.numa_node, near);
        break;
    }
    return p;
  }

  std::vector<int> allowed(int node) const { return intersection(node_named(host_, node).cpus, agent_cpus_); }

  int package_of(int cpu) const {
    const auto it = host_.package_of.find(cpu);
    return it == host_.package_of.end() ? 0 : it->second;
  }

  // As torch decides it: a node's package is that of its lowest allowed
  // CPU, and a node none of whose CPUs is allowed belongs to none.
  std::vector<int> socket_cpus(const std::vector<int>& near) const {
    const int package = package_of(near.front());
    std::vector<int> out;
    for (const auto& n : host_.nodes) {
      const std::vector<int> cpus = allowed(n.os_index);
      if (!cpus.empty() && package_of(cpus.front()) == package) out.insert(out.end(), cpus.begin(), cpus.end());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // This worker's place among the workers' GPUs on `node`, as CUDA numbers
  // them: every GPU of the agent's view counts, not only those of this
  // node's workers, so a job of fewer workers than GPUs leaves them room.
  std::pair<int, int> place_on_node(int local_rank, int node) const {
    int place = 0, count = 0;
    for (int v = 0; v < static_cast<int>(visible_.size()); ++v) {
      if (host_.gpus[visible_[v]].numa_node != node) continue;
      if (v < local_rank) ++place;
      ++count;
    }
    return {place, count};
  }

  std::vector<int> exclusive_cpus(int local_rank, int node, const std::vector<int>& near) const {
    const auto [place, gpus] = place_on_node(local_rank, node);
    const auto cores = grouped(near, host_.core_of);
    const int n = static_cast<int>(cores.size());
    if (n < gpus)
      throw NumaBindingError(fmt::format("exclusive needs a physical core for each GPU, and NUMA node {} has {} "
                                         "(of the CPUs cxxrun may use: {}) for {} GPUs",
                                         node, n, cpu_list_text(near), gpus));
    const int each = n / gpus, extra = n % gpus;
    const int start = place * each + std::min(place, extra);
    const int end = start + each + (place < extra ? 1 : 0);
    std::vector<int> out;
    int i = 0;
    for (const auto& [key, cpus] : cores) {
      if (i >= start && i < end) out.insert(out.end(), cpus.begin(), cpus.end());
      ++i;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<int> core_complex_cpus(int local_rank, int node, const std::vector<int>& near) const {
    const int place = place_on_node(local_rank, node).first;
    std::vector<std::vector<int>> groups;
    for (auto& [key, cpus] : grouped(near, host_.cache_of)) groups.push_back(std::move(cpus));
    // Larger caches first (more CPUs to share one), then by lowest CPU.
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    return groups[place % groups.size()];
  }

  const NumaTopology& host_;
  const NumaRequest& r_;
  std::vector<int> agent_cpus_;
  std::vector<int> visible_;
};

}  // namespace

std::optional<NumaMode> numa_mode_named(std::string_view name) {
  if (name == "node") return NumaMode::node;
  if (name == "socket") return NumaMode::socket;
  if (name == "exclusive") return NumaMode::exclusive;
  if (name == "core-complex") return NumaMode::core_complex;
  return std::nullopt;
}

std::vector<NumaPlacement> plan_numa_binding(const NumaTopology& host, const NumaRequest& request) {
  return Planner(host, request).plan();
}

std::vector<int> agent_affinity() {
  // Large enough for any machine Linux supports (CONFIG_NR_CPUS <= 8192).
  constexpr int kMaxCpus = 8192;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  std::vector<int> out;
  if (sched_getaffinity(0, size, set) == 0)
    for (int cpu = 0; cpu < kMaxCpus; ++cpu)
      if (CPU_ISSET_S(cpu, size, set)) out.push_back(cpu);
  CPU_FREE(set);
  return out;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string describe_binding(int local_rank, const NumaPlacement& p) {
  if (p.memory_node)
    return fmt::format("local rank {}: bound to CPUs {} and memory of NUMA node {} (near GPU {}, {})", local_rank,
                       cpu_list_text(p.cpus), *p.memory_node, p.gpu, p.gpu_pci);
  return fmt::format("local rank {}: bound to CPUs {} (NUMA node {}, near GPU {}, {})", local_rank,
                     cpu_list_text(p.cpus), p.numa_node, p.gpu, p.gpu_pci);
}

}  // namespace cxxrun::agent
