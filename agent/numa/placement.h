// Where one worker runs under --numa-binding: the CPUs it may use and, in
// node mode, the NUMA node its memory comes from. Plain data, so that
// agent::Config carries it without hwloc; agent/numa/binding.h computes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct NumaPlacement {
  std::vector<int> cpus;           // ascending, never empty
  std::optional<int> memory_node;  // node mode only: memory is bound there (MPOL_BIND)
  int numa_node = 0;               // the GPU's NUMA node
  int gpu = 0;                     // the GPU's index among the host's, in PCI bus order
  std::string gpu_pci;             // its PCI address, "0000:3b:00.0"
};

}  // namespace cxxrun::agent
