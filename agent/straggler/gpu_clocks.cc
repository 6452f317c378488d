#include "agent/straggler/gpu_clocks.h"

namespace cxxrun::agent {

std::string clock_reason_words(unsigned long long reasons) {
  using namespace clock_reason;
  std::string words;
  auto add = [&](const char* word) { words += (words.empty() ? "" : ", ") + std::string(word); };
  if (reasons & (kSwThermalSlowdown | kHwThermalSlowdown)) add("thermal");
  if (reasons & kHwPowerBrakeSlowdown) add("power brake");
  if (reasons & kSwPowerCap) add("power cap");
  if ((reasons & kHwSlowdown) && !(reasons & (kHwThermalSlowdown | kHwPowerBrakeSlowdown))) add("hardware slowdown");
  if (reasons & kApplicationsClocksSetting) add("applications clocks setting");
  return words;
}

}  // namespace cxxrun::agent
