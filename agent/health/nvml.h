// NVIDIA's management library (NVML), loaded at run time with dlopen and
// never linked: cxxrun runs on hosts without a driver, and there simply
// checks no GPU. No CUDA or NVML header is needed to build; the few types,
// constants and functions used are declared here, byte for byte as nvml.h
// declares them (CUDA 12.6's nvml.h, NVML API version 12, whose functions
// every driver since R525 exports). The two later additions, the recovery
// action field and its values, come from CUDA 12.8+'s nvml.h (driver R570+),
// as NVIDIA's cuda-bindings (cuda.bindings.nvml) list them.
//
// Only gpu_health.cc and nvml_clocks.cc use this header: NVML's types stay
// out of every other file.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace cxxrun::agent::nvml {

// nvml.h: nvmlReturn_t (an enum: int-sized).
using Return = int;
inline constexpr Return kSuccess = 0;               // NVML_SUCCESS
inline constexpr Return kInvalidArgument = 2;       // NVML_ERROR_INVALID_ARGUMENT
inline constexpr Return kNotSupported = 3;          // NVML_ERROR_NOT_SUPPORTED
inline constexpr Return kNoPermission = 4;          // NVML_ERROR_NO_PERMISSION
inline constexpr Return kNotFound = 6;              // NVML_ERROR_NOT_FOUND
inline constexpr Return kInsufficientSize = 7;      // NVML_ERROR_INSUFFICIENT_SIZE
inline constexpr Return kDriverNotLoaded = 9;       // NVML_ERROR_DRIVER_NOT_LOADED
inline constexpr Return kTimeout = 10;              // NVML_ERROR_TIMEOUT
inline constexpr Return kLibraryNotFound = 12;      // NVML_ERROR_LIBRARY_NOT_FOUND
inline constexpr Return kFunctionNotFound = 13;     // NVML_ERROR_FUNCTION_NOT_FOUND
inline constexpr Return kGpuIsLost = 15;            // NVML_ERROR_GPU_IS_LOST
inline constexpr Return kResetRequired = 16;        // NVML_ERROR_RESET_REQUIRED

// nvml.h: nvmlDevice_t and nvmlEventSet_t, opaque handles.
struct DeviceSt;
using Device = DeviceSt*;
struct EventSetSt;
using EventSet = EventSetSt*;

// nvml.h: nvmlPciInfo_t (what nvmlDeviceGetPciInfo_v3 fills).
struct PciInfo {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: "00000000:3B:00.0"
};
static_assert(sizeof(PciInfo) == 68);

// nvml.h: nvmlMemory_t (v1: `used` counts the driver's reservation too).
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(Memory) == 24);

// nvml.h: nvmlProcessInfo_t (= nvmlProcessInfo_v2_t), what
// nvmlDeviceGetComputeRunningProcesses_v3 fills.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(ProcessInfo) == 24);

// nvml.h: nvmlValue_t and nvmlFieldValue_t.
union Value {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};
struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;     // nvmlValueType_t
  Return nvmlReturn;  // this field's own result: check it before `value`
  Value value;
};
static_assert(sizeof(FieldValue) == 40);

// nvml.h: nvmlEventData_t. For an Xid event, eventData is the Xid.
struct EventData {
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(EventData) == 32);

inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
inline constexpr unsigned int kFeatureEnabled = 1;                     // NVML_FEATURE_ENABLED
inline constexpr int kMemoryErrorTypeUncorrected = 1;                  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr int kVolatileEcc = 0;                                 // NVML_VOLATILE_ECC
// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (CUDA 12.8+, R570+); an older driver
// answers the field with NVML_ERROR_NOT_SUPPORTED or INVALID_ARGUMENT.
inline constexpr unsigned int kFieldGpuRecoveryAction = 230;
inline constexpr unsigned int kRecoveryActionNone = 0;  // NVML_GPU_RECOVERY_ACTION_NONE
inline constexpr int kClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

// The library, its functions resolved. Not thread-safe beyond what NVML
// itself is: gpu_health.cc calls it from one thread.
class Library {
 public:
  // Where load() looks: CXXRUN_NVML_LIBRARY (a full path: a driver in a
  // place the loader does not search, or tests' fake) when set and not
  // empty, else "libnvidia-ml.so.1", found the loader's way
  // (LD_LIBRARY_PATH, ld.so.cache).
  static std::string default_path();

  // Opens `path` and resolves every function below. nullptr, with one line
  // in `why_not`, when the file is not there or not NVML (a function every
  // R525+ driver has is missing): "no NVIDIA driver: libnvidia-ml.so.1 not
  // found". Never calls into the library: nvmlInit_v2 is the caller's.
  static std::unique_ptr<Library> load(const std::string& path, std::string& why_not);

  // NVML's words for `r` ("GPU is lost"), or "NVML error N" when the
  // library has none.
  std::string error(Return r) const;

  // NVML's index of the GPU whose handle is `gpu`; -1 when none is.
  int index_of(Device gpu) const;

  // The pids of the compute processes on `device` (a GPU or a MIG instance).
  Return compute_pids(Device device, std::vector<unsigned>& pids) const;

  // nvml.h's functions, under their own names. Every one is set after a
  // successful load().
  Return (*nvmlInit_v2)() = nullptr;
  Return (*nvmlShutdown)() = nullptr;
  const char* (*nvmlErrorString)(Return) = nullptr;
  Return (*nvmlDeviceGetCount_v2)(unsigned int*) = nullptr;
  Return (*nvmlDeviceGetHandleByIndex_v2)(unsigned int, Device*) = nullptr;
  Return (*nvmlDeviceGetHandleByUUID)(const char*, Device*) = nullptr;
  Return (*nvmlDeviceIsMigDeviceHandle)(Device, unsigned int*) = nullptr;
  Return (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(Device, Device*) = nullptr;
  Return (*nvmlDeviceGetPciInfo_v3)(Device, PciInfo*) = nullptr;
  Return (*nvmlDeviceGetName)(Device, char*, unsigned int) = nullptr;
  Return (*nvmlDeviceGetUUID)(Device, char*, unsigned int) = nullptr;
  Return (*nvmlDeviceGetFieldValues)(Device, int, FieldValue*) = nullptr;
  Return (*nvmlDeviceGetRetiredPagesPendingStatus)(Device, unsigned int*) = nullptr;  // nvmlEnableState_t*
  Return (*nvmlDeviceGetRemappedRows)(Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*) = nullptr;
  Return (*nvmlDeviceGetTotalEccErrors)(Device, int, int, unsigned long long*) = nullptr;
  Return (*nvmlEventSetCreate)(EventSet*) = nullptr;
  Return (*nvmlDeviceRegisterEvents)(Device, unsigned long long, EventSet) = nullptr;
  Return (*nvmlEventSetWait_v2)(EventSet, EventData*, unsigned int) = nullptr;
  Return (*nvmlEventSetFree)(EventSet) = nullptr;
  Return (*nvmlDeviceGetMemoryInfo)(Device, Memory*) = nullptr;
  Return (*nvmlDeviceGetComputeRunningProcesses_v3)(Device, unsigned int*, ProcessInfo*) = nullptr;

  // The clocks (agent/health/nvml_clocks.h): resolved when the library has
  // them, nullptr otherwise; load() does not require them, so that the
  // health checks never depend on them. nvmlDeviceGetCurrentClocksEventReasons
  // is the newer name (R535+) of ...ThrottleReasons, which later drivers
  // may drop.
  Return (*nvmlDeviceGetClockInfo)(Device, int, unsigned int*) = nullptr;     // (device, nvmlClockType_t, MHz)
  Return (*nvmlDeviceGetMaxClockInfo)(Device, int, unsigned int*) = nullptr;  // (device, nvmlClockType_t, MHz)
  Return (*nvmlDeviceGetCurrentClocksEventReasons)(Device, unsigned long long*) = nullptr;
  Return (*nvmlDeviceGetCurrentClocksThrottleReasons)(Device, unsigned long long*) = nullptr;

 private:
  Library() = default;
};

// NVML's busId ("00000000:3B:00.0") as hwloc and sysfs write it:
// "0000:3b:00.0".
std::string bus_id(const PciInfo& pci);

// A recovery action in the user's words: 1 "GPU reset required", 2 "node
// reboot required", ..., "unknown recovery action N" past what this build
// knows.
std::string recovery_action_name(unsigned int action);

// What an Xid means, in a few words, for the common ones (13, 31, 43, 45,
// 48, 61-64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 154); "see NVIDIA's Xid
// catalog" for the rest.
std::string xid_meaning(unsigned long long xid);
// Xids that are most often the program's own fault (an illegal address, a
// channel reset after it): a user's bug must not make healthy nodes step
// out, so these are reported but leave the node healthy.
bool xid_is_programs_own(unsigned long long xid);

}  // namespace cxxrun::agent::nvml
