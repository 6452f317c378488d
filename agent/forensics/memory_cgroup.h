// Where a worker's memory is accounted, and what the OOM killer did there.
//
// The memory controller lives in one of two places: a cgroup v1 hierarchy
// ("cgroup" mount with the memory option: pure v1 hosts, and the hybrid
// layout that keeps cgroup2 at /sys/fs/cgroup/unified without memory), or
// cgroup2. On v1 the agent gives each rank its own memory cgroup under its
// own (make_rank), so a rank's OOM counter and peak are that rank's alone;
// it sets no limit there, the limits above still apply. On pure v2 the job's
// cgroup2 tree is where ranks live (agent/process/cgroup.h), and this only reads.
//
// Passive: no threads, nothing logged; reasons come back as text. Nothing
// throws except std::bad_alloc.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

struct MemoryReading {
  std::string cgroup;  // the cgroup's directory, as shown to users
  // It is the worker's own per-rank cgroup: its counters count that rank and
  // its children only.
  bool own = false;
  // Bytes in force: the smallest limit from this cgroup up to the root.
  // nullopt: no limit anywhere (or none could be read).
  std::optional<long long> limit;
  std::optional<long long> peak;       // bytes; v1 max_usage_in_bytes, v2 memory.peak (5.19+)
  std::optional<long long> oom_kills;  // the OOM killer's kills counted here
};

class MemoryCgroups {
 public:
  enum class Hierarchy { none, v1, v2 };
  // Where detect() looks; tests point it at fake files.
  struct Paths {
    std::string mountinfo = "/proc/self/mountinfo";
    std::string self_cgroup = "/proc/self/cgroup";
    std::string proc = "/proc";
  };

  // Finds the memory controller: a v1 "cgroup" mount whose super options
  // name memory, else the cgroup2 mount when a cgroup2 cgroup.controllers
  // from this process's cgroup up to the mount lists memory. Makes nothing.
  // When there is none, hierarchy() is none and why() says why. `job_token`
  // names the per-rank tree make_rank() makes (cxxrun-<job_token>).
  static MemoryCgroups detect(const std::string& job_token);
  static MemoryCgroups detect(const std::string& job_token, const Paths& paths);

  // Removes the cxxrun-<job_token> tree, if one was made: retries a busy
  // cgroup for up to a second, then leaves it (the guardian removes
  // job_dir() after the agent is gone). Kills nothing.
  ~MemoryCgroups();
  MemoryCgroups(MemoryCgroups&& other) noexcept;
  MemoryCgroups& operator=(MemoryCgroups&& other) noexcept;
  MemoryCgroups(const MemoryCgroups&) = delete;
  MemoryCgroups& operator=(const MemoryCgroups&) = delete;

  Hierarchy hierarchy() const { return hierarchy_; }
  const std::string& why() const { return why_; }  // "" unless hierarchy() is none
  const std::string& mount() const { return mount_; }      // where the memory hierarchy is mounted
  const std::string& own_dir() const { return own_dir_; }  // the agent's own memory cgroup

  // v1 only: makes <own_dir>/cxxrun-<job_token>/attempt-<attempt>/rank-<local_rank>
  // (mkdir -p, 0755; it may exist) and returns its cgroup.procs opened
  // O_WRONLY|O_CLOEXEC, for a just-forked child to write "0" to (moving
  // itself) or the parent to write the child's pid to. The caller closes it.
  // Sets no limit. -1 with the reason in `why_not` otherwise: "pure cgroup
  // v2: per-rank memory is the job cgroup's", "cannot create a memory cgroup
  // for each rank under <own_dir>: Permission denied", why() when none.
  int make_rank(int attempt, int local_rank, std::string& why_not);
  // Removes attempt-<attempt>'s rank cgroups and its own, children first.
  // One still busy (a process not yet gone) is retried at the next call and
  // by the destructor. Never waits.
  void end_attempt(int attempt);
  // <own_dir>/cxxrun-<job_token> once make_rank() made it; "" before.
  std::string job_dir() const { return job_dir_; }
  // An unkillable process is still in the tree: the destructor tries once
  // instead of waiting for it to empty.
  void abandon() { abandoned_ = true; }
  // Where make_rank() makes that tree (v1), made yet or not: what a guardian
  // started before any worker removes after the agent died. "" when none.
  std::string tree() const;

  // The memory cgroup directory of a live process: v1 its memory line of
  // /proc/<pid>/cgroup; v2 its "0::" cgroup, or the nearest ancestor with
  // memory.events when its own has no memory files (a cgroup without the
  // controller is accounted, hierarchically, by that ancestor). nullopt when
  // the process is gone, has no such cgroup, or nothing accounts it.
  std::optional<std::string> cgroup_of(pid_t pid) const;

  // What the files of the memory cgroup at `dir` say, v1 or v2 by which
  // files are there; `own` is copied into the result. A file missing or
  // unreadable leaves its field nullopt.
  static MemoryReading read(const std::string& dir, bool own);

 private:
  MemoryCgroups() = default;
  std::string translate(const std::string& path) const;
  void sweep();
  void remove_job();

  Hierarchy hierarchy_ = Hierarchy::none;
  std::string why_;
  std::string mount_;       // the mount point
  std::string mount_root_;  // the hierarchy's path the mount shows (mountinfo field 4)
  std::string own_dir_;
  std::string token_;
  std::string proc_ = "/proc";
  std::string job_dir_;
  std::vector<std::string> busy_;  // cgroups that were busy when removed, children first
  bool abandoned_ = false;
};

// Pure helpers, exposed for their tests.

// One /proc/self/mountinfo line's fields that matter here, octal escapes
// (\040 for a space) decoded. nullopt for a malformed line.
struct MountEntry {
  std::string root;           // field 4: the path of the filesystem this mount shows
  std::string mount_point;    // field 5
  std::string fstype;         // after " - "
  std::string super_options;  // the last field
};
std::optional<MountEntry> parse_mountinfo_line(std::string_view line);

// The memory cgroup path in the text of /proc/<pid>/cgroup: v1 the path of
// the "N:controllers:path" line whose comma-separated controllers include
// "memory" ("4:memory:/x", "5:cpu,memory:/x"); v2 the path of "0::path".
std::optional<std::string> memory_cgroup_path(std::string_view proc_cgroup, bool v1);

// The value of `key` in "key value" lines (memory.stat's
// hierarchical_memory_limit, memory.oom_control's and memory.events'
// oom_kill). nullopt when absent or not a number.
std::optional<long long> keyed_value(std::string_view text, std::string_view key);

// A limit as a cgroup file shows it: "max" (v2) and anything >= 2^62 (v1
// shows 9223372036854771712 for none) are no limit, nullopt; so is text that
// is not a number.
std::optional<long long> parse_limit(std::string_view text);

// Bytes in 1024-based units, one decimal when under 10 of the unit:
// "900 B", "900 KiB", "1.5 GiB", "512 MiB".
std::string format_bytes(long long bytes);

}  // namespace cxxrun::agent
