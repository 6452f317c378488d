#include "agent/straggler/host_pressure.h"

#include <charconv>

#include "agent/straggler/small_file.h"

namespace cxxrun::agent {
namespace {

using std::string_view;

string_view line_starting(string_view text, string_view prefix) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const string_view line = text.substr(0, nl);
    if (line.substr(0, prefix.size()) == prefix) return line;
    text.remove_prefix(nl == string_view::npos ? text.size() : nl + 1);
  }
  return {};
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(string_view text) {
  string_view line = line_starting(text, "cpu ");
  if (line.empty()) return std::nullopt;
  line.remove_prefix(4);
  // user nice system idle iowait irq softirq steal [guest guest_nice]
  unsigned long long values[8] = {};
  int n = 0;
  while (n < 8) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), values[n]);
    if (ec != std::errc()) break;
    line.remove_prefix(static_cast<std::size_t>(end - line.data()));
    ++n;
  }
  if (n < 4) return std::nullopt;  // not even user nice system idle
  CpuTimes t;
  for (int i = 0; i < n; ++i) t.total += values[i];
  t.steal = n == 8 ? values[7] : 0;
  return t;
}

std::optional<unsigned long long> parse_psi_some_total(string_view text) {
  const string_view line = line_starting(text, "some ");
  const std::size_t at = line.find("total=");
  if (at == string_view::npos) return std::nullopt;
  const string_view value = line.substr(at + 6);
  unsigned long long total = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), total);
  if (ec != std::errc()) return std::nullopt;
  return total;
}

std::optional<CpuTimes> read_cpu_times(const std::string& proc_stat) {
  // Only the first line matters; the kernel writes the whole file anyway
  // (a line per CPU), so this runs once a window, not once a tick.
  const auto text = read_small_file(proc_stat, 512);
  return text ? parse_proc_stat(*text) : std::nullopt;
}

PressureTotals read_pressure(const std::string& cgroup_dir) {
  auto total = [](const std::string& path) -> std::optional<unsigned long long> {
    const auto text = read_small_file(path, 256);
    return text ? parse_psi_some_total(*text) : std::nullopt;
  };
  PressureTotals p;
  if (!cgroup_dir.empty()) {
    p.cpu_us = total(cgroup_dir + "/cpu.pressure");
    if (p.cpu_us) {
      p.where = cgroup_dir;
      p.memory_us = total(cgroup_dir + "/memory.pressure");
      p.io_us = total(cgroup_dir + "/io.pressure");
      return p;
    }
  }
  p.where = "/proc/pressure";
  p.cpu_us = total("/proc/pressure/cpu");
  p.memory_us = total("/proc/pressure/memory");
  p.io_us = total("/proc/pressure/io");
  return p;
}

}  // namespace cxxrun::agent
