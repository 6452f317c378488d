#include "agent/numa/worker_binding.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace cxxrun::agent {
namespace {

constexpr int kBits = sizeof(unsigned long) * CHAR_BIT;

std::vector<unsigned long> mask_of(const std::vector<int>& bits) {
  std::vector<unsigned long> mask;
  for (int bit : bits) {
    if (bit < 0) continue;
    const size_t word = static_cast<size_t>(bit / kBits);
    if (mask.size() <= word) mask.resize(word + 1, 0);
    mask[word] |= 1UL << (bit % kBits);
  }
  return mask;
}

}  // namespace

BindingMasks binding_masks(const NumaPlacement& p) {
  BindingMasks m;
  m.cpus = mask_of(p.cpus);
  if (p.memory_node) m.memory_nodes = mask_of({*p.memory_node});
  return m;
}

BindingStep apply_binding(const BindingMasks& m) noexcept {
  // glibc's cpu_set_t is this same array of unsigned long words, the layout
  // the system call takes.
  if (!m.cpus.empty() &&
      sched_setaffinity(0, m.cpus.size() * sizeof(unsigned long), reinterpret_cast<const cpu_set_t*>(m.cpus.data())) != 0)
    return BindingStep::cpus;
  // glibc has no wrapper (libnuma's would be one more dependency). The
  // kernel reads maxnode - 1 bits.
  if (!m.memory_nodes.empty() &&
      syscall(SYS_set_mempolicy, MPOL_BIND, m.memory_nodes.data(), m.memory_nodes.size() * kBits + 1) != 0)
    return BindingStep::memory;
  return BindingStep::none;
}

}  // namespace cxxrun::agent
