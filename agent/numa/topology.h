// What --numa-binding needs to know of a host, read by hwloc and handed on
// as plain data: its NVIDIA GPUs and the NUMA node each is attached to, its
// NUMA nodes' CPUs, and which CPUs share a physical core, a package and a
// last-level cache. hwloc's header stays inside topology.cc.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct NumaTopology {
  struct Gpu {
    std::string pci_bus_id;  // "0000:3b:00.0"
    int numa_node = 0;
  };
  struct Node {
    int os_index = 0;
    std::vector<int> cpus;  // ascending; every CPU of the node, allowed to us or not
  };
  // In PCI bus order (domain, bus, device, function): the order of
  // nvidia-smi's indices, and CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID.
  std::vector<Gpu> gpus;
  std::vector<Node> nodes;  // ascending os_index
  // Each CPU's physical core, package and highest-level data or unified
  // cache, each named by the lowest CPU in it (the package by its number).
  std::map<int, int> core_of;
  std::map<int, int> package_of;
  std::map<int, int> cache_of;
};

class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// This machine's topology, or the one `xml_path` holds (hwloc's XML, what
// `lstopo --of xml` writes). Without a path hwloc discovers the machine,
// which its own variables (HWLOC_XMLFILE, HWLOC_FSROOT) may redirect.
// GPUs are NVIDIA PCI devices of display class 0x0300 or 0x0302; NVSwitch
// bridges (0x0680) and other vendors' display devices are not GPUs.
// Throws TopologyError when hwloc cannot load it.
NumaTopology read_numa_topology(const std::string& xml_path);

}  // namespace cxxrun::agent
