// How many workers "--nproc-per-node=cpu|gpu|auto" means on this machine,
// found without linking CUDA.
#pragma once

#include <string>
#include <vector>

#include "launcher/environment.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

// Online CPUs (what Python's os.cpu_count() reports).
int cpu_count();

// NVIDIA GPUs the driver lists under `proc_dir` (one entry per GPU), limited
// by CUDA_VISIBLE_DEVICES in `env` the way the CUDA runtime reads it.
int nvidia_gpu_count(const Env& env, const std::string& proc_dir = "/proc/driver/nvidia/gpus");

// How CUDA_VISIBLE_DEVICES narrows `physical` GPUs: entries are read up to the
// first invalid one (an index out of range, negative or repeated, or junk);
// "GPU-"/"MIG-" UUIDs count as valid.
int visible_gpu_count(const std::string& cuda_visible_devices, int physical);

// The most workers one node may run. Real jobs run one worker per GPU (8 or
// 16 a node) or at most one per CPU (a few hundred on the largest machines);
// 4096 leaves room above both. Beyond it a value is a typo (99999), and
// taking it would mean seconds of forking, two pipes per worker and a failure
// box for every worker that fork() refused.
inline constexpr int kMaxNprocPerNode = 4096;

// This user's soft RLIMIT_NPROC (what `ulimit -u` shows); -1 when it is
// RLIM_INFINITY.
long long process_limit();

struct DeviceCounts {
  int cpus = 0;
  int gpus = 0;
  long long max_processes = -1;  // process_limit(); -1: no limit
};

// --nproc-per-node: a positive integer, cpu, gpu or auto, resolving to at
// most kMaxNprocPerNode workers and fewer than max_processes allows. Adds a
// note saying what a device name resolved to.
int resolve_nproc(const RawValue& value, const DeviceCounts& counts,
                  std::vector<std::string>& notes);

}  // namespace cxxrun::launcher
