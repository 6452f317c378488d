// How fast a GPU runs now: its SM clock against the most it can run at,
// and why the driver holds it lower (NVML's clocks event reasons, formerly
// "throttle reasons"). A thermally throttled or power-capped GPU makes its
// rank the slowest of a synchronous job without any fault.
//
// This wing only declares what it needs; the reader is NVML's, loaded at
// run time by the health wing above (agent/health/nvml_clocks.h), and
// handed down by whoever builds the sampler. A host without NVML has none,
// and its ranks get no GPU fields.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::agent {

// NVML's nvmlClocksEventReason* bits (nvml.h; the same values as the older
// nvmlClocksThrottleReason*). GPU idle (0x1) is not a slowdown and is left
// out of the words.
namespace clock_reason {
inline constexpr unsigned long long kGpuIdle = 0x1;
inline constexpr unsigned long long kApplicationsClocksSetting = 0x2;
inline constexpr unsigned long long kSwPowerCap = 0x4;
inline constexpr unsigned long long kHwSlowdown = 0x8;
inline constexpr unsigned long long kSwThermalSlowdown = 0x20;
inline constexpr unsigned long long kHwThermalSlowdown = 0x40;
inline constexpr unsigned long long kHwPowerBrakeSlowdown = 0x80;
}  // namespace clock_reason

struct GpuClockSample {
  unsigned sm_mhz = 0;      // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  unsigned max_sm_mhz = 0;  // nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM); 0 unknown
  std::optional<unsigned long long> reasons;  // clock_reason bits; nullopt when the driver does not say
  std::chrono::steady_clock::time_point at;   // when it was read
};

// The reasons in words, most specific first, joined by ", ": "thermal"
// (software or hardware), "power brake", "power cap", "hardware slowdown"
// (only when neither thermal nor power brake explains it: the hardware
// sets it with them), "applications clocks setting". "" for none or idle.
std::string clock_reason_words(unsigned long long reasons);

class GpuClocks {
 public:
  virtual ~GpuClocks() = default;
  // The GPUs to read from now on, each named as CUDA_VISIBLE_DEVICES names
  // one: an NVML index ("3"), a "GPU-" or a "MIG-" UUID (read on its GPU).
  virtual void watch(std::vector<std::string> gpus) = 0;
  // The newest reading of `gpu` (one of watch()'s); nullopt when there is
  // none yet or it does not answer. Never waits for the driver.
  virtual std::optional<GpuClockSample> latest(const std::string& gpu) const = 0;
};

}  // namespace cxxrun::agent
