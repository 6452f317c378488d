// One GPU check's verdict (agent/health/gpu_health.h runs the checks,
// agent/health/gpu_verdict.h words them): a header of its own so that the
// wording sits below the checks that use it.
#pragma once

#include <string>

namespace cxxrun::agent {

// One check's verdict, one line in the user's words.
struct GpuCheck {
  std::string name;  // "gpu-answers", "gpu-recovery-action", "gpu-memory-errors", "gpu-xid", "gpu-memory-drained"
  bool healthy = true;
  // What failed, naming the GPU (index, PCI bus id) and NVML's words; when
  // healthy, what was seen, with "not checked" where the driver cannot say.
  std::string detail;
};

}  // namespace cxxrun::agent
