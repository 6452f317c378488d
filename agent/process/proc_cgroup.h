// Which cgroup a process is in, as the kernel says it in /proc/<pid>/cgroup:
// one line per hierarchy, "N:controllers:path" for cgroup v1 and "0::path"
// for cgroup2. The one reader of that text, for whoever needs a process's
// memory cgroup (agent/forensics/memory_cgroup.h) or CPU cgroup
// (agent/straggler/cpu_throttling.h). Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

// The path of `controller`'s cgroup in `proc_cgroup`: for v1, the line
// whose comma-separated controllers include it ("2:cpu,cpuacct:/x" for
// "cpu"); "" asks for cgroup2's "0::path". The path may itself hold ':'.
std::optional<std::string> cgroup_path(std::string_view proc_cgroup, std::string_view controller);

// Whether the comma-separated `list` holds `item` ("cpu,cpuacct", "cpu").
bool lists(std::string_view list, std::string_view item);

}  // namespace cxxrun::agent
