#include "agent/health/nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

namespace cxxrun::agent::nvml {
namespace {

constexpr const char* kSoname = "libnvidia-ml.so.1";

// Sets `slot` to `name`'s address in `handle`; false when it is missing.
template <typename F>
bool resolve(void* handle, const char* name, F& slot) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  return slot != nullptr;
}

}  // namespace

std::string Library::default_path() {
  const char* path = std::getenv("CXXRUN_NVML_LIBRARY");
  return path != nullptr && *path != '\0' ? path : kSoname;
}

std::unique_ptr<Library> Library::load(const std::string& path, std::string& why_not) {
  // RTLD_LOCAL: NVML's symbols must not satisfy anyone else's lookups.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    why_not = path == kSoname ? fmt::format("no NVIDIA driver: {} not found", kSoname)
                              : fmt::format("no NVML at {}: {}", path, error != nullptr ? error : "dlopen failed");
    return nullptr;
  }
  // The handle is never closed: NVML may leave threads of its own behind
  // after nvmlShutdown, and dlopen counts references, so opening it again
  // costs nothing.
  std::unique_ptr<Library> lib(new Library());
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& slot) {
    if (!resolve(handle, name, slot) && missing == nullptr) missing = name;
  };
  need("nvmlInit_v2", lib->nvmlInit_v2);
  need("nvmlShutdown", lib->nvmlShutdown);
  need("nvmlErrorString", lib->nvmlErrorString);
  need("nvmlDeviceGetCount_v2", lib->nvmlDeviceGetCount_v2);
  need("nvmlDeviceGetHandleByIndex_v2", lib->nvmlDeviceGetHandleByIndex_v2);
  need("nvmlDeviceGetHandleByUUID", lib->nvmlDeviceGetHandleByUUID);
  need("nvmlDeviceIsMigDeviceHandle", lib->nvmlDeviceIsMigDeviceHandle);
  need("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", lib->nvmlDeviceGetDeviceHandleFromMigDeviceHandle);
  need("nvmlDeviceGetPciInfo_v3", lib->nvmlDeviceGetPciInfo_v3);
  need("nvmlDeviceGetName", lib->nvmlDeviceGetName);
  need("nvmlDeviceGetUUID", lib->nvmlDeviceGetUUID);
  need("nvmlDeviceGetFieldValues", lib->nvmlDeviceGetFieldValues);
  need("nvmlDeviceGetRetiredPagesPendingStatus", lib->nvmlDeviceGetRetiredPagesPendingStatus);
  need("nvmlDeviceGetRemappedRows", lib->nvmlDeviceGetRemappedRows);
  need("nvmlDeviceGetTotalEccErrors", lib->nvmlDeviceGetTotalEccErrors);
  need("nvmlEventSetCreate", lib->nvmlEventSetCreate);
  need("nvmlDeviceRegisterEvents", lib->nvmlDeviceRegisterEvents);
  need("nvmlEventSetWait_v2", lib->nvmlEventSetWait_v2);
  need("nvmlEventSetFree", lib->nvmlEventSetFree);
  need("nvmlDeviceGetMemoryInfo", lib->nvmlDeviceGetMemoryInfo);
  need("nvmlDeviceGetComputeRunningProcesses_v3", lib->nvmlDeviceGetComputeRunningProcesses_v3);
  resolve(handle, "nvmlDeviceGetClockInfo", lib->nvmlDeviceGetClockInfo);
  resolve(handle, "nvmlDeviceGetMaxClockInfo", lib->nvmlDeviceGetMaxClockInfo);
  resolve(handle, "nvmlDeviceGetCurrentClocksEventReasons", lib->nvmlDeviceGetCurrentClocksEventReasons);
  resolve(handle, "nvmlDeviceGetCurrentClocksThrottleReasons", lib->nvmlDeviceGetCurrentClocksThrottleReasons);
  if (missing != nullptr) {
    why_not = fmt::format("{} lacks {}: a driver older than R525, which cxxrun checks no GPU with", path, missing);
    return nullptr;
  }
  return lib;
}

std::string Library::error(Return r) const {
  const char* text = nvmlErrorString != nullptr ? nvmlErrorString(r) : nullptr;
  return text != nullptr && *text != '\0' ? std::string(text) : fmt::format("NVML error {}", r);
}

int Library::index_of(Device gpu) const {
  unsigned count = 0;
  if (nvmlDeviceGetCount_v2(&count) != kSuccess) return -1;
  for (unsigned i = 0; i < count; ++i) {
    Device d = nullptr;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) == kSuccess && d == gpu) return static_cast<int>(i);
  }
  return -1;
}

Return Library::compute_pids(Device device, std::vector<unsigned>& pids) const {
  std::vector<ProcessInfo> processes(64);
  unsigned n = static_cast<unsigned>(processes.size());
  Return r = nvmlDeviceGetComputeRunningProcesses_v3(device, &n, processes.data());
  if (r == kInsufficientSize) {  // n says how many there are now; a few more may start
    processes.resize(n + 16);
    n = static_cast<unsigned>(processes.size());
    r = nvmlDeviceGetComputeRunningProcesses_v3(device, &n, processes.data());
  }
  pids.clear();
  for (unsigned i = 0; r == kSuccess && i < n; ++i) pids.push_back(processes[i].pid);
  return r;
}

std::string bus_id(const PciInfo& pci) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(pci.busId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return pci.busId;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

std::string recovery_action_name(unsigned int action) {
  // nvmlDeviceGpuRecoveryAction_t.
  switch (action) {
    case 0: return "none";
    case 1: return "GPU reset required";
    case 2: return "node reboot required";
    case 3: return "drain peer-to-peer traffic (then ask again)";
    case 4: return "drain and reset (the GPU runs at reduced capacity)";
    case 5: return "IMEX domain recovery required";
    case 6: return "PCIe bus reset required";
    case 7: return "system reboot required";
    default: return fmt::format("unknown recovery action {}", action);
  }
}

bool xid_is_programs_own(unsigned long long xid) { return xid == 13 || xid == 31 || xid == 43 || xid == 45; }

std::string xid_meaning(unsigned long long xid) {
  // NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors), in short. The
  // first four are most often the program's own fault, not the GPU's.
  static const std::map<unsigned long long, const char*> meanings = {
      {13, "graphics engine exception (often the program's own illegal address or instruction)"},
      {31, "GPU memory page fault (often the program's own illegal address)"},
      {43, "GPU stopped processing (a channel was reset, often after the program's own fault)"},
      {45, "preemptive cleanup after an earlier error"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recorded"},
      {64, "ECC page retirement or row remapping failed"},
      {68, "video decoder exception"},
      {69, "graphics engine class error"},
      {74, "NVLink error"},
      {79, "the GPU fell off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error: the GPU needs a reset"},
      {119, "GSP RPC timeout: the GPU's system processor stopped answering"},
      {120, "GSP error: the GPU's system processor failed"},
      {154, "the GPU's recovery action changed"},
  };
  const auto it = meanings.find(xid);
  return it != meanings.end() ? it->second : "see NVIDIA's Xid catalog";
}

}  // namespace cxxrun::agent::nvml
