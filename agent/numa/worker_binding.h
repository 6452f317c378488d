// A worker's --numa-binding as the kernel takes it: a CPU mask for
// sched_setaffinity and, in node mode, a node mask for set_mempolicy
// (MPOL_BIND). Made before fork, so that applying it in the child between
// fork and exec is two system calls, both async-signal-safe. Everything the
// worker execs and every thread it starts inherits both.
#pragma once

#include <vector>

#include "agent/numa/placement.h"

namespace cxxrun::agent {

struct BindingMasks {
  std::vector<unsigned long> cpus;
  std::vector<unsigned long> memory_nodes;  // empty: memory is left alone
};

BindingMasks binding_masks(const NumaPlacement& placement);

// What apply_binding could not do.
enum class BindingStep { none, cpus, memory };

// Binds the calling process. Returns the step that failed (none: both
// took), with errno set. Async-signal-safe.
BindingStep apply_binding(const BindingMasks& masks) noexcept;

}  // namespace cxxrun::agent
