#include "launcher/devices.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "launcher/values.h"

namespace cxxrun::launcher {

int cpu_count() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) return static_cast<int>(n);
  return std::max(1u, std::thread::hardware_concurrency());
}

int visible_gpu_count(const std::string& cuda_visible_devices, int physical) {
  std::set<int> seen;
  int count = 0;
  std::string_view rest = cuda_visible_devices;
  for (bool more = true; more;) {
    auto comma = rest.find(',');
    more = comma != std::string_view::npos;
    std::string_view item = rest.substr(0, comma);
    rest = more ? rest.substr(comma + 1) : std::string_view{};
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);

    if (item.starts_with("GPU-") || item.starts_with("MIG-")) {
      ++count;
      continue;
    }
    int index = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    bool valid = !item.empty() && ec == std::errc() && end == item.data() + item.size() &&
                 index >= 0 && index < physical && seen.insert(index).second;
    if (!valid) break;  // CUDA ignores everything from the first bad entry on
    ++count;
  }
  return std::min(count, physical);
}

int nvidia_gpu_count(const Env& env, const std::string& proc_dir) {
  std::error_code ec;
  int physical = 0;
  for (std::filesystem::directory_iterator it(proc_dir, ec), end; !ec && it != end;
       it.increment(ec))
    ++physical;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end())
    return visible_gpu_count(it->second, physical);
  return physical;
}

long long process_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NPROC, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<long long>(limit.rlim_cur);
}

namespace {

int count_of(const RawValue& value, const DeviceCounts& counts, std::vector<std::string>& notes) {
  const std::string& text = value.text;
  auto resolved = [&](int n, std::string_view device) {
    notes.push_back(fmt::format(
        "Using nproc_per_node={}, setting nproc_per_node to {} since the instance has {} {}", text,
        n, n, device));
    return n;
  };
  if (text == "cpu") return resolved(counts.cpus, "cpu");
  if (text == "gpu") {
    if (counts.gpus <= 0) throw UsageError(value.shown() + ": CUDA is not available");
    return resolved(counts.gpus, "gpu");
  }
  if (text == "auto")
    return counts.gpus > 0 ? resolved(counts.gpus, "gpu") : resolved(counts.cpus, "cpu");
  if (text == "xpu")
    throw UsageError(value.shown() + ": Intel XPU devices are not supported by cxxrun");

  int n = 0;
  try {
    n = parse_int(value);
  } catch (const UsageError&) {
    n = 0;
  }
  if (n <= 0) throw UsageError(value.shown() + ": must be a positive integer, auto, cpu or gpu");
  return n;
}

}  // namespace

int resolve_nproc(const RawValue& value, const DeviceCounts& counts,
                  std::vector<std::string>& notes) {
  const int n = count_of(value, counts, notes);
  const bool named = value.text == "cpu" || value.text == "gpu" || value.text == "auto";
  const std::string means = named ? fmt::format(" ({} workers here)", n) : "";
  if (n > kMaxNprocPerNode)
    throw UsageError(
        fmt::format("{}: at most {} workers per node{}", value.shown(), kMaxNprocPerNode, means));
  // The user's other processes count against the limit too, so this is the
  // least it takes: the workers, the agent and its guardian. Above it, fork()
  // certainly fails part way through the group.
  if (counts.max_processes >= 0 && n + 2LL > counts.max_processes)
    throw UsageError(fmt::format(
        "{}: {} workers, the agent and its guardian are more processes than RLIMIT_NPROC allows "
        "this user (ulimit -u: {})",
        value.shown(), n, counts.max_processes));
  return n;
}

}  // namespace cxxrun::launcher
