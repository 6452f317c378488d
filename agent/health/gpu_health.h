// Is this node's GPU side fit for the next attempt? Asked through NVML
// (agent/health/nvml.h, loaded at run time) before every rendezvous round: every
// GPU visible to the job answers, none has a recovery action pending, a
// memory error that needs a reset, or a new Xid; and, after an attempt,
// every GPU's memory drains before the next spawn (NVIDIA NVRx's checks).
// A host without an NVIDIA driver has no GPU checks, which is not a failure.
//
// Every NVML call runs on a thread of GpuHealth's own: a GPU that fell off
// the bus can block NVML for minutes, and no NVML call can be cancelled.
// Each public call waits at most its deadline for NVML's answers and then
// reports the silence as unhealthy; a later call made while that thread is
// still stuck reports it at once. Blocking, so call from a worker thread,
// never the event loop; one caller at a time.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/health/gpu_check.h"

namespace cxxrun::agent {

// How long one call waits for NVML to answer (open() for nvmlInit_v2, which
// takes a few seconds on a host whose GPUs are not in persistence mode).
inline constexpr std::chrono::milliseconds kNvmlAnswerWithin{10'000};
// NVRx's defaults for the memory drain: 50 s, and 512 MiB a GPU of slack
// above where the GPU was when the job started (NVML's `used` counts the
// driver's own reservation, 615 MiB on an idle H200, so zero is never
// reached).
inline constexpr std::chrono::milliseconds kGpuMemoryDrainLimit{50'000};
inline constexpr unsigned long long kGpuMemoryTolerance = 512ULL << 20;

class GpuHealth {
 public:
  // The GPUs the job sees: every NVML device in NVML's (PCI) order, or
  // those CUDA_VISIBLE_DEVICES names, read as the CUDA runtime reads it: up
  // to the first entry that names no GPU (an index out of range or
  // repeated, junk, an unknown UUID). Indices are NVML's, in PCI bus order:
  // CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID, and on a host of one GPU
  // model. "GPU-" UUIDs (or a unique prefix of one) and "MIG-" UUIDs are
  // found through NVML; a MIG instance is checked on its GPU, its memory
  // drained on the instance. Empty: no GPU.
  //
  // nullptr, with one line in `why_not`, when this host has no GPU checks:
  // no NVML library (agent/health/nvml.h's Library::default_path), a driver older
  // than R525, or NVML saying no driver is loaded or not letting us in.
  // NVML that is there but cannot start (a driver/library mismatch, a lost
  // GPU, no answer within `answer_within`) gives a GpuHealth whose check()
  // says so, unhealthy, and tries again each time.
  static std::unique_ptr<GpuHealth> open(const std::optional<std::string>& cuda_visible_devices,
                                         std::string& why_not,
                                         std::chrono::milliseconds answer_within = kNvmlAnswerWithin);
  ~GpuHealth();  // waits at most answer_within for NVML's thread
  GpuHealth(const GpuHealth&) = delete;
  GpuHealth& operator=(const GpuHealth&) = delete;

  // Checks 1-4, one GpuCheck each, in this order: "gpu-answers" (each
  // visible GPU gives a handle, its PCI info, name and UUID),
  // "gpu-recovery-action" (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION is NONE),
  // "gpu-memory-errors" (no retired page pending, no row remapping failure,
  // at most `uncorrected_ecc_limit` uncorrected volatile ECC errors), "gpu-xid"
  // (no Xid event since open() or the previous check(); each is reported
  // once). Only "gpu-answers", unhealthy, when NVML cannot start or does
  // not answer. Returns within about answer_within.
  std::vector<GpuCheck> check(unsigned long long uncorrected_ecc_limit = 0);

  // Check 5, "gpu-memory-drained": polls (every 200 ms) until every visible
  // GPU uses at most `tolerance_bytes` more than it did when open() first
  // reached it (before any worker of the job: the driver's reservation and
  // memory others held then are not the last attempt's to give back);
  // unhealthy once `limit` has passed,
  // naming each GPU still holding memory and its compute processes, or at
  // once when a GPU does not answer. Returns within about limit.
  GpuCheck wait_memory_drained(std::chrono::milliseconds limit = kGpuMemoryDrainLimit,
                               unsigned long long tolerance_bytes = kGpuMemoryTolerance);

  // For a startup line: "4 GPUs (0000:18:00.0, 0000:2a:00.0, ...)", "no GPU
  // visible (CUDA_VISIBLE_DEVICES is empty)", "NVML cannot start: ...".
  std::string describe() const;

  // What NVML's thread holds (gpu_health.cc).
  struct State;

 private:
  explicit GpuHealth(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace cxxrun::agent
