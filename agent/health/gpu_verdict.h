// How GpuHealth (agent/health/gpu_health.h) words its verdicts: a GPU as NVML
// knows it, named the way nvidia-smi and the CUDA runtime name it ("GPU 2
// (0000:3b:00.0)", a MIG instance on its GPU), and one check's findings over
// every GPU folded into one line, with what the driver could not say.
// Internal to gpu_health.cc; a header of its own so that the wording has one
// home apart from the NVML thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "agent/health/gpu_check.h"
#include "agent/health/nvml.h"

namespace cxxrun::agent::gpu_verdict {

using Clock = std::chrono::steady_clock;

// A GPU the job sees, as NVML knows it.
struct Gpu {
  explicit Gpu(std::string named, int index = -1) : named(std::move(named)), index(index) {}
  std::string named;                  // its CUDA_VISIBLE_DEVICES entry, or its index
  int index = -1;                     // NVML's index of the GPU; -1 while unknown
  nvml::Device handle = nullptr;      // the GPU; nullptr while it does not answer
  nvml::Device instance = nullptr;    // its MIG instance, or the GPU: whose memory drains
  std::string pci;                    // "0000:3b:00.0" once known
  bool watched = false;               // registered for Xid events
  // Memory in use when the job started, before any of its workers: what
  // the drain waits to get back to. NVML's `used` counts what the driver
  // reserves (615 MiB on an idle H200 with driver 580) and what others held.
  std::optional<unsigned long long> before;
  std::string unwatched_why;          // NVML's error when it would not register it
  bool by_uuid() const { return named.starts_with("GPU-") || named.starts_with("MIG-"); }
  bool mig() const { return named.starts_with("MIG-"); }
};

inline std::string seconds(Clock::duration d) {
  return fmt::format("{:g} s", std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0);
}

inline std::string bytes(unsigned long long n) {
  return n >= (1ULL << 30) ? fmt::format("{:.1f} GiB", n / double(1ULL << 30))
                           : fmt::format("{} MiB", n >> 20);
}

inline std::string joined(const std::vector<std::string>& parts, std::string_view by = "; ") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(by)) + p;
  return out;
}

// "GPU 2", or its UUID while NVML has not said which GPU that is.
inline std::string short_label(const Gpu& g) { return g.index >= 0 ? fmt::format("GPU {}", g.index) : g.named; }

// "GPU 2 (0000:3b:00.0)"; "MIG-… on GPU 2 (…)" for an instance.
inline std::string label(const Gpu& g, bool instance = true) {
  std::string out = short_label(g);
  if (!g.pci.empty()) out += fmt::format(" ({})", g.pci);
  return instance && g.mig() && g.index >= 0 ? fmt::format("{} on {}", g.named, out) : out;
}

// "1 GPU", "2 GPUs".
inline std::string gpus_count(size_t n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); }

// One check's findings over every GPU: what is wrong, and what NVML could
// not say (by what and why, the GPUs it could not say it of).
struct Findings {
  std::vector<std::string> bad;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> not_checked;
  size_t checked = 0;  // GPUs NVML answered for

  // `all_well` says what was seen when nothing is bad and something was checked.
  GpuCheck verdict(std::string name, std::string all_well) const {
    std::vector<std::string> parts = !bad.empty() ? bad
                                     : checked > 0 ? std::vector<std::string>{all_well}
                                     : not_checked.empty() ? std::vector<std::string>{"no GPU to check"}
                                                           : std::vector<std::string>{};
    for (const auto& [what_why, gpus] : not_checked)
      parts.push_back(fmt::format("{} not checked on {} ({})", what_why.first, joined(gpus, ", "), what_why.second));
    return {std::move(name), bad.empty(), joined(parts)};
  }
};

}  // namespace cxxrun::agent::gpu_verdict
