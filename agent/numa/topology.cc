#include "agent/numa/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <tuple>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

constexpr unsigned kNvidia = 0x10de;
constexpr unsigned kVgaClass = 0x0300;  // consumer and workstation cards
constexpr unsigned k3dClass = 0x0302;   // datacenter GPUs (A100, H100, ...)

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology load(const std::string& xml_path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw TopologyError("hwloc cannot start: " + std::string(strerror(errno)));
  Topology t(raw);
  // Every CPU of a node, not only the ones this process may use: the
  // planner intersects with the agent's own affinity, as torch does.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  // Every PCI device, so that the class decides what a GPU is (hwloc's
  // default keeps none, and "important" would hide an NVSwitch, not tell
  // it apart).
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0)
    throw TopologyError(fmt::format("hwloc cannot read the topology in {}: {}", xml_path, strerror(errno)));
  if (hwloc_topology_load(raw) != 0)
    throw TopologyError(xml_path.empty()
                            ? fmt::format("hwloc cannot read this machine's topology: {}", strerror(errno))
                            : fmt::format("hwloc cannot load the topology in {}: {}", xml_path, strerror(errno)));
  return t;
}

std::vector<int> members(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

// The deepest-level data or unified cache above `pu` (torch reads sysfs's
// cache/index*/ the same way); nullptr when hwloc knows of none.
hwloc_obj_t last_level_cache(hwloc_obj_t pu) {
  hwloc_obj_t best = nullptr;
  for (hwloc_obj_t o = pu->parent; o; o = o->parent)
    if (hwloc_obj_type_is_dcache(o->type) && (!best || o->attr->cache.depth > best->attr->cache.depth)) best = o;
  return best;
}

void read_cpus(hwloc_topology_t t, NumaTopology& out) {
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu));) {
    const int cpu = static_cast<int>(pu->os_index);
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
    out.core_of[cpu] = core ? hwloc_bitmap_first(core->cpuset) : cpu;
    hwloc_obj_t cache = last_level_cache(pu);
    out.cache_of[cpu] = cache ? hwloc_bitmap_first(cache->cpuset) : cpu;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
    out.package_of[cpu] = !package                                 ? 0
                          : package->os_index != HWLOC_UNKNOWN_INDEX ? static_cast<int>(package->os_index)
                                                                     : static_cast<int>(package->logical_index);
  }
  for (hwloc_obj_t node = nullptr; (node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node));)
    out.nodes.push_back({static_cast<int>(node->os_index), members(node->cpuset)});
  std::sort(out.nodes.begin(), out.nodes.end(), [](const auto& a, const auto& b) { return a.os_index < b.os_index; });
}

void read_gpus(hwloc_topology_t t, NumaTopology& out) {
  struct Found {
    std::tuple<unsigned, unsigned, unsigned, unsigned> address;
    NumaTopology::Gpu gpu;
  };
  std::vector<Found> found;
  for (hwloc_obj_t dev = nullptr; (dev = hwloc_get_next_pcidev(t, dev));) {
    const auto& pci = dev->attr->pcidev;
    if (pci.vendor_id != kNvidia || (pci.class_id != kVgaClass && pci.class_id != k3dClass)) continue;
    // The device hangs below the smallest CPU-side object that holds it.
    // When the firmware does not say (sysfs numa_node -1) that is the whole
    // machine, and torch's max(numa_node, 0) means node 0: the lowest node
    // of the set is the same answer.
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t, dev);
    const int node = near ? std::max(0, hwloc_bitmap_first(near->nodeset)) : 0;
    found.push_back({{pci.domain, pci.bus, pci.dev, pci.func},
                     {fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bus, pci.dev, pci.func), node}});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.address < b.address; });
  for (Found& f : found) out.gpus.push_back(std::move(f.gpu));
}

}  // namespace

NumaTopology read_numa_topology(const std::string& xml_path) {
  Topology t = load(xml_path);
  NumaTopology out;
  read_cpus(t.get(), out);
  read_gpus(t.get(), out);
  return out;
}

}  // namespace cxxrun::agent
