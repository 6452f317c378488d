#include "agent/health/nvml_clocks.h"

#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "agent/health/nvml.h"

namespace cxxrun::agent {

using Clock = std::chrono::steady_clock;

struct NvmlClocks::State {
  std::unique_ptr<nvml::Library> lib;
  std::chrono::milliseconds every{};

  // Shared with the caller, under mutex.
  mutable std::mutex mutex;
  std::condition_variable wake, exited_cv;
  bool stopping = false, exited = false, poked = false;
  std::vector<std::string> watched;
  std::map<std::string, GpuClockSample> readings;

  // The thread's own.
  bool started = false;
  Clock::time_point tried{};
  std::map<std::string, nvml::Device> handles;

  // The GPU `name` names, as CUDA_VISIBLE_DEVICES does: an index, or a
  // UUID (a MIG instance's: its GPU, whose clocks it runs at). nullptr
  // when it names none.
  nvml::Device handle(const std::string& name) {
    if (const auto it = handles.find(name); it != handles.end()) return it->second;
    nvml::Device d = nullptr;
    if (name.starts_with("GPU-") || name.starts_with("MIG-")) {
      if (lib->nvmlDeviceGetHandleByUUID(name.c_str(), &d) != nvml::kSuccess) return nullptr;
      unsigned is_mig = 0;
      nvml::Device whole = nullptr;
      if (lib->nvmlDeviceIsMigDeviceHandle(d, &is_mig) == nvml::kSuccess && is_mig != 0 &&
          lib->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(d, &whole) == nvml::kSuccess)
        d = whole;
    } else {
      unsigned index = 0;
      const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
      if (ec != std::errc() || end != name.data() + name.size() ||
          lib->nvmlDeviceGetHandleByIndex_v2(index, &d) != nvml::kSuccess)
        return nullptr;
    }
    handles.emplace(name, d);
    return d;
  }

  std::optional<GpuClockSample> read(nvml::Device d) const {
    GpuClockSample s;
    if (lib->nvmlDeviceGetClockInfo(d, nvml::kClockSm, &s.sm_mhz) != nvml::kSuccess) return std::nullopt;
    if (lib->nvmlDeviceGetMaxClockInfo(d, nvml::kClockSm, &s.max_sm_mhz) != nvml::kSuccess) s.max_sm_mhz = 0;
    unsigned long long reasons = 0;
    const auto reasons_of = lib->nvmlDeviceGetCurrentClocksEventReasons != nullptr
                                ? lib->nvmlDeviceGetCurrentClocksEventReasons
                                : lib->nvmlDeviceGetCurrentClocksThrottleReasons;
    if (reasons_of != nullptr && reasons_of(d, &reasons) == nvml::kSuccess) s.reasons = reasons;
    s.at = Clock::now();
    return s;
  }

  // One pass over the watched GPUs.
  void pass() {
    if (!started) {
      if (tried != Clock::time_point{} && Clock::now() - tried < std::chrono::seconds(30)) return;
      tried = Clock::now();
      started = lib->nvmlInit_v2() == nvml::kSuccess;
      if (!started) return;
    }
    std::vector<std::string> names;
    {
      std::lock_guard lock(mutex);
      names = watched;
    }
    for (const std::string& name : names) {
      const nvml::Device d = handle(name);
      const auto sample = d != nullptr ? read(d) : std::nullopt;
      if (!sample) {
        handles.erase(name);  // looked up again next time: a GPU reset gives a new handle
        continue;
      }
      std::lock_guard lock(mutex);
      readings[name] = *sample;
    }
  }

  static void serve(std::shared_ptr<State> s) {
    for (;;) {
      s->pass();
      std::unique_lock lock(s->mutex);
      s->wake.wait_for(lock, s->every, [&] { return s->stopping || s->poked; });
      if (s->stopping) break;
      s->poked = false;
    }
    if (s->started) s->lib->nvmlShutdown();
    std::lock_guard lock(s->mutex);
    s->exited = true;
    s->exited_cv.notify_all();
  }
};

std::shared_ptr<NvmlClocks> NvmlClocks::open(std::string& why_not, std::chrono::milliseconds every) {
  auto lib = nvml::Library::load(nvml::Library::default_path(), why_not);
  if (!lib) return nullptr;
  if (lib->nvmlDeviceGetClockInfo == nullptr || lib->nvmlDeviceGetMaxClockInfo == nullptr) {
    why_not = "NVML lacks nvmlDeviceGetClockInfo: no GPU clocks";
    return nullptr;
  }
  auto state = std::make_shared<State>();
  state->lib = std::move(lib);
  state->every = every;
  std::thread(&State::serve, state).detach();
  return std::shared_ptr<NvmlClocks>(new NvmlClocks(std::move(state)));
}

NvmlClocks::~NvmlClocks() {
  std::unique_lock lock(state_->mutex);
  state_->stopping = true;
  state_->wake.notify_all();
  state_->exited_cv.wait_for(lock, std::chrono::seconds(1), [&] { return state_->exited; });
}

void NvmlClocks::watch(std::vector<std::string> gpus) {
  {
    std::lock_guard lock(state_->mutex);
    state_->watched = std::move(gpus);
    state_->poked = true;
  }
  state_->wake.notify_all();  // read them now, not a period later
}

std::optional<GpuClockSample> NvmlClocks::latest(const std::string& gpu) const {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->readings.find(gpu);
  if (it == state_->readings.end()) return std::nullopt;
  return it->second;
}

}  // namespace cxxrun::agent
