// Is a rank's CPU time capped? The CPU controller's bandwidth limit (a
// quota per period: v2 cpu.max, v1 cpu.cfs_quota_us) throttles every task
// of a cgroup once the cgroup has used its quota, and its cpu.stat counts
// how long: v2 throttled_usec, v1 throttled_time (nanoseconds). A task of a
// throttled cgroup stays runnable (R), so its scheduler state cannot tell.
//
// A limit on any ancestor throttles the rank too, and the counters are the
// limiting cgroup's own, so every cgroup from the rank's up to (not
// including) the hierarchy's root is read, on the v1 hierarchy that has
// the cpu controller (its own mount, or cpu,cpuacct) and on cgroup2 (where
// only cgroups with the cpu controller enabled have the counters). A host
// with either, both (a hybrid layout: v2 at /sys/fs/cgroup/unified) or none
// works; a file that is not there is "not known", never an error.
//
// Passive: no threads, nothing logged, nothing written.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

struct CpuThrottle {
  unsigned long long nr_throttled = 0;  // periods in which the cgroup ran out of quota
  unsigned long long throttled_ns = 0;  // time its tasks were held back, summed over CPUs
};

// A cpu.stat's text, v2 ("throttled_usec N") or v1 ("throttled_time N",
// ns). nullopt when it has neither (a v2 cgroup without the controller
// shows only usage_usec, user_usec, system_usec).
std::optional<CpuThrottle> parse_cpu_stat(std::string_view text);

class CpuCgroups {
 public:
  // Finds the v1 cpu hierarchy and cgroup2 in `mountinfo`; either may be
  // missing. `proc` is where /proc/<pid>/cgroup is read.
  static CpuCgroups detect(const std::string& mountinfo = "/proc/self/mountinfo", const std::string& proc = "/proc");

  // Where they are mounted; "" when not.
  const std::string& v1_mount() const { return v1_.mount; }
  const std::string& v2_mount() const { return v2_.mount; }

  // A process's cgroup directories, nearest first.
  struct Of {
    std::vector<std::string> cpu;  // v1 cpu cgroup and its ancestors, then v2's; each may throttle it (mount roots left out: no limit there)
    std::string v2;                // its cgroup2 directory ("" when none): where its pressure (PSI) is kept
  };
  // nullopt when the process is gone.
  std::optional<Of> of(pid_t pid) const;

  // The throttling counters of the cgroup at `dir`; nullopt when it has
  // none (no controller, gone).
  static std::optional<CpuThrottle> read(const std::string& dir);

 private:
  struct Mount {
    std::string mount;  // its mount point
    std::string root;   // the hierarchy's path the mount shows (a container's mount of a subtree)
  };
  // `path` (as /proc/<pid>/cgroup shows it) as a directory under `m`, then
  // its ancestors down to, not including, a mount of the hierarchy's own
  // root (a root cgroup has no limit). Nothing when it is outside the mount.
  static void chain(const Mount& m, const std::string& path, std::vector<std::string>& out);
  static std::string directory(const Mount& m, const std::string& path);

  Mount v1_, v2_;
  std::string proc_ = "/proc";
};

}  // namespace cxxrun::agent
