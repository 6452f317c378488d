// The straggler sampler's GPU clocks (agent/straggler/gpu_clocks.h) read
// through NVML (agent/health/nvml.h, loaded at run time): each watched
// GPU's SM clock, its maximum, and the clocks event (throttle) reasons.
// It lives here, above the straggler wing, because NVML's loader does;
// the supervisor builds it and hands it down.
//
// Every NVML call runs on a thread of its own, once every `every`: a GPU
// that fell off the bus can block NVML for minutes, and the sampler runs on
// the agent's loop, which must not wait. latest() only copies what that
// thread last read; a thread stuck in NVML leaves readings that age, which
// the sampler ignores.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/straggler/gpu_clocks.h"

namespace cxxrun::agent {

class NvmlClocks final : public GpuClocks {
 public:
  // nullptr, with one line in `why_not`, when there is no NVML to read
  // (Library::default_path() does not load, or lacks the clock functions).
  // NVML itself starts on the reader's thread; a driver that will not
  // start leaves every latest() empty, and it is tried again every 30 s.
  static std::shared_ptr<NvmlClocks> open(std::string& why_not,
                                          std::chrono::milliseconds every = std::chrono::seconds(1));
  // Stops the thread; waits for it at most a second (one stuck in NVML is
  // left to end by itself).
  ~NvmlClocks() override;

  void watch(std::vector<std::string> gpus) override;
  std::optional<GpuClockSample> latest(const std::string& gpu) const override;

  struct State;  // nvml_clocks.cc

 private:
  explicit NvmlClocks(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace cxxrun::agent
