// What the host does to every rank at once: CPU steal (a hypervisor ran
// someone else on our virtual CPUs; /proc/stat) and pressure stall
// information (PSI: the share of time some task waited for a CPU, memory or
// I/O), of the job's cgroup2 directory when it keeps its own (*.pressure)
// and of the whole host (/proc/pressure/) otherwise. Both are cumulative
// counters, read at each window's edges and compared.
//
// Passive: nothing logged; a file that is not there (a kernel without PSI,
// psi=0) is "not known", never an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

struct CpuTimes {
  unsigned long long steal = 0;  // jiffies, all CPUs together
  unsigned long long total = 0;  // user + nice + system + idle + iowait + irq + softirq + steal
};

// The "cpu " line of /proc/stat's text (guest time is already in user).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);

// The "some" line's total= of a PSI file's text ("some avg10=0.00
// avg60=0.00 avg300=0.00 total=12345"): microseconds that at least one
// task stalled.
std::optional<unsigned long long> parse_psi_some_total(std::string_view text);

struct PressureTotals {
  std::string where;  // the directory read: a cgroup2 directory, or "/proc/pressure"
  std::optional<unsigned long long> cpu_us, memory_us, io_us;
};

std::optional<CpuTimes> read_cpu_times(const std::string& proc_stat = "/proc/stat");

// The "some" totals of `cgroup_dir`'s cpu.pressure, memory.pressure and
// io.pressure when it has cpu.pressure, else /proc/pressure/{cpu,memory,io}
// ("" asks for the latter).
PressureTotals read_pressure(const std::string& cgroup_dir);

}  // namespace cxxrun::agent
