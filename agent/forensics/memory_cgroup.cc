#include "agent/forensics/memory_cgroup.h"
#include "agent/process/proc_cgroup.h"

#include "agent/process/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace cxxrun::agent {
namespace {

using std::string_view;

// v1 shows "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with
// 4 KiB pages, other values with other page sizes): anything this big is none.
constexpr unsigned long long no_limit_from = 1ULL << 62;

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

string_view trim(string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<long long> parse_number(string_view text) {
  text = trim(text);
  long long value = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<long long> read_number(const std::string& path) {
  const auto text = read_text(path);
  return text ? parse_number(*text) : std::nullopt;
}


// Whether a space-separated cgroup.controllers text holds `item`.
bool lists_word(string_view text, string_view item) {
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;)
    if (word == item) return true;
  return false;
}

std::string parent_of(const std::string& dir) {
  const std::size_t slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : dir.substr(0, slash);
}

std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = dir + "/" + e->d_name;
      struct stat st {};
      if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
        out.push_back(path);
    }
    closedir(d);
  }
  return out;
}

// rmdir of `dir` and the cgroups under it, children first (a cgroup with
// children cannot go). Those still holding a process (EBUSY) are appended
// to `busy`, children before their parents.
void remove_tree(const std::string& dir, std::vector<std::string>& busy) {
  for (const std::string& child : subdirectories(dir)) remove_tree(child, busy);
  if (::rmdir(dir.c_str()) != 0 && errno == EBUSY) busy.push_back(dir);
}

}  // namespace

std::optional<MountEntry> parse_mountinfo_line(string_view line) {
  // "36 25 0:32 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory"
  const std::size_t dash = line.find(" - ");
  if (dash == string_view::npos) return std::nullopt;
  auto decode = [](const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 3 < s.size() &&
          std::all_of(s.begin() + i + 1, s.begin() + i + 4, [](char c) { return c >= '0' && c <= '7'; })) {
        out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
        i += 3;
      } else {
        out.push_back(s[i]);
      }
    }
    return out;
  };
  std::istringstream before{std::string(line.substr(0, dash))};
  std::istringstream after{std::string(line.substr(dash + 3))};
  std::string id, parent, device, root, mount_point, fstype, source, options;
  if (!(before >> id >> parent >> device >> root >> mount_point)) return std::nullopt;
  if (!(after >> fstype >> source >> options)) return std::nullopt;
  return MountEntry{decode(root), decode(mount_point), fstype, options};
}

std::optional<std::string> memory_cgroup_path(string_view proc_cgroup, bool v1) {
  return cgroup_path(proc_cgroup, v1 ? "memory" : "");
}

std::optional<long long> keyed_value(string_view text, string_view key) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const string_view line = text.substr(0, nl);
    text.remove_prefix(nl == string_view::npos ? text.size() : nl + 1);
    const std::size_t space = line.find(' ');
    if (space != string_view::npos && line.substr(0, space) == key) return parse_number(line.substr(space + 1));
  }
  return std::nullopt;
}

std::optional<long long> parse_limit(string_view text) {
  text = trim(text);
  unsigned long long value = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size()) return std::nullopt;  // "max" too
  if (value >= no_limit_from) return std::nullopt;
  return static_cast<long long>(value);
}

std::string format_bytes(long long bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const unsigned long long magnitude =
      bytes < 0 ? 0ULL - static_cast<unsigned long long>(bytes) : static_cast<unsigned long long>(bytes);
  const std::string sign = bytes < 0 ? "-" : "";
  if (magnitude < 1024) return sign + std::to_string(magnitude) + " B";
  double value = static_cast<double>(magnitude);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  // Rounding may carry into the next unit: 1023.6 KiB is "1.0 MiB".
  if (std::round(value) >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (std::round(value * 10) / 10 < 10)
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  else
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  return sign + text;
}

MemoryCgroups MemoryCgroups::detect(const std::string& job_token) { return detect(job_token, Paths{}); }

MemoryCgroups MemoryCgroups::detect(const std::string& job_token, const Paths& paths) {
  MemoryCgroups m;
  m.token_ = job_token;
  m.proc_ = paths.proc;
  std::ifstream in(paths.mountinfo);
  if (!in) {
    m.why_ = "cannot read " + paths.mountinfo;
    return m;
  }
  std::optional<MountEntry> v1, v2;
  for (std::string line; std::getline(in, line);) {
    auto entry = parse_mountinfo_line(line);
    if (!entry) continue;
    if (!v1 && entry->fstype == "cgroup" && lists(entry->super_options, "memory")) v1 = entry;
    if (!v2 && entry->fstype == "cgroup2") v2 = entry;
  }
  if (!v1 && !v2) {
    m.why_ = "no memory cgroup controller is mounted";
    return m;
  }
  const auto& mount = v1 ? *v1 : *v2;
  const std::string self = read_text(paths.self_cgroup).value_or("");
  const auto path = memory_cgroup_path(self, v1.has_value());
  if (!path) {
    m.why_ = "this process has no " + std::string(v1 ? "v1 memory" : "cgroup v2") + " cgroup in " + paths.self_cgroup;
    return m;
  }
  m.mount_ = mount.mount_point;
  m.mount_root_ = mount.root;
  m.own_dir_ = m.translate(*path);
  if (m.own_dir_.empty()) {
    m.why_ = "this process's memory cgroup " + *path + " is outside the mounted hierarchy (" + mount.mount_point + ")";
    return m;
  }
  if (v1) {
    m.hierarchy_ = Hierarchy::v1;
    return m;
  }
  // On cgroup2 the controller may be bound elsewhere (a v1 mount not visible
  // here) or simply not enabled: a cgroup.controllers on the way up must
  // list it.
  for (std::string dir = m.own_dir_;; dir = parent_of(dir)) {
    const auto controllers = read_text(dir + "/cgroup.controllers");
    if (controllers && lists_word(*controllers, "memory")) {
      m.hierarchy_ = Hierarchy::v2;
      return m;
    }
    if (dir.size() <= m.mount_.size() || dir == "/") break;
  }
  m.why_ = "no memory cgroup controller is mounted (cgroup2 at " + m.mount_ + " has no memory controller)";
  return m;
}

// A path from /proc/<pid>/cgroup to its directory: paths are shown from the
// hierarchy's root, the mount shows its own root (a container's mount of a
// subtree). "" when the path is outside what the mount shows.
std::string MemoryCgroups::translate(const std::string& path) const {
  std::string rel = path;
  if (mount_root_ != "/" && !mount_root_.empty()) {
    const bool under = rel.compare(0, mount_root_.size(), mount_root_) == 0 &&
                       (rel.size() == mount_root_.size() || rel[mount_root_.size()] == '/');
    if (!under) return "";
    rel = rel.substr(mount_root_.size());
  }
  if (rel.find("/..") != std::string::npos || (!rel.empty() && rel[0] != '/')) return "";
  return mount_ + (rel == "/" ? "" : rel);
}

MemoryCgroups::~MemoryCgroups() { remove_job(); }

void MemoryCgroups::remove_job() {
  if (job_dir_.empty()) return;
  // Processes just killed leave their cgroup a moment later; one that
  // cannot be killed never does (abandon()).
  for (int i = 0; i < (abandoned_ ? 1 : 100); ++i) {
    std::vector<std::string> busy;
    remove_tree(job_dir_, busy);
    if (!exists(job_dir_)) break;
    usleep(10000);
  }
  job_dir_.clear();
  busy_.clear();
}

MemoryCgroups::MemoryCgroups(MemoryCgroups&& other) noexcept { *this = std::move(other); }

MemoryCgroups& MemoryCgroups::operator=(MemoryCgroups&& other) noexcept {
  if (this == &other) return *this;
  remove_job();
  hierarchy_ = other.hierarchy_;
  why_ = std::move(other.why_);
  mount_ = std::move(other.mount_);
  mount_root_ = std::move(other.mount_root_);
  own_dir_ = std::move(other.own_dir_);
  token_ = std::move(other.token_);
  proc_ = std::move(other.proc_);
  job_dir_ = std::move(other.job_dir_);
  busy_ = std::move(other.busy_);
  abandoned_ = other.abandoned_;
  other.job_dir_.clear();  // the tree is ours now
  other.busy_.clear();
  return *this;
}

int MemoryCgroups::make_rank(int attempt, int local_rank, std::string& why_not) {
  if (hierarchy_ == Hierarchy::v2) {
    why_not = "pure cgroup v2: per-rank memory is the job cgroup's";
    return -1;
  }
  if (hierarchy_ == Hierarchy::none) {
    why_not = why_;
    return -1;
  }
  const std::string job = tree();
  const std::string attempt_dir = job + "/attempt-" + std::to_string(attempt);
  const std::string rank = attempt_dir + "/rank-" + std::to_string(local_rank);
  for (const std::string* dir : {&job, &attempt_dir, &rank}) {
    if (::mkdir(dir->c_str(), 0755) != 0 && errno != EEXIST) {
      why_not = "cannot create a memory cgroup for each rank under " + own_dir_ + ": " + strerror(errno);
      return -1;
    }
    if (dir == &job) job_dir_ = job;
  }
  const int fd = ::open((rank + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) why_not = "cannot open " + rank + "/cgroup.procs: " + strerror(errno);
  return fd;
}

std::string MemoryCgroups::tree() const {
  return hierarchy_ == Hierarchy::v1 ? own_dir_ + "/" + job_cgroup_name(token_) : "";
}

void MemoryCgroups::sweep() {
  std::vector<std::string> still;
  for (const std::string& dir : busy_)
    if (::rmdir(dir.c_str()) != 0 && errno == EBUSY) still.push_back(dir);
  busy_ = std::move(still);
}

void MemoryCgroups::end_attempt(int attempt) {
  if (job_dir_.empty()) return;
  sweep();
  remove_tree(job_dir_ + "/attempt-" + std::to_string(attempt), busy_);
}

std::optional<std::string> MemoryCgroups::cgroup_of(pid_t pid) const {
  if (hierarchy_ == Hierarchy::none) return std::nullopt;
  const auto text = read_text(proc_ + "/" + std::to_string(pid) + "/cgroup");
  if (!text) return std::nullopt;
  const auto path = memory_cgroup_path(*text, hierarchy_ == Hierarchy::v1);
  if (!path) return std::nullopt;
  std::string dir = translate(*path);
  if (dir.empty()) return std::nullopt;
  if (hierarchy_ == Hierarchy::v1) return dir;
  // The root cgroup has no memory.events: nothing accounts a process there.
  for (;; dir = parent_of(dir)) {
    if (exists(dir + "/memory.events")) return dir;
    if (dir.size() <= mount_.size() || dir == "/") return std::nullopt;
  }
}

MemoryReading MemoryCgroups::read(const std::string& dir, bool own) {
  MemoryReading r;
  r.cgroup = dir;
  r.own = own;
  if (exists(dir + "/memory.oom_control") || exists(dir + "/memory.limit_in_bytes")) {
    // v1: memory.stat's hierarchical_memory_limit is already the smallest
    // limit up the hierarchy.
    const auto stat = read_text(dir + "/memory.stat");
    const auto hierarchical = stat ? keyed_value(*stat, "hierarchical_memory_limit") : std::nullopt;
    if (hierarchical) {
      r.limit = parse_limit(std::to_string(*hierarchical));
    } else if (const auto limit = read_text(dir + "/memory.limit_in_bytes")) {
      r.limit = parse_limit(*limit);
    }
    r.peak = read_number(dir + "/memory.max_usage_in_bytes");
    if (const auto control = read_text(dir + "/memory.oom_control")) r.oom_kills = keyed_value(*control, "oom_kill");
    return r;
  }
  // v2: each ancestor's memory.max applies; the root has none, and every
  // cgroup below one with the controller has it.
  for (std::string d = dir; exists(d + "/memory.max");) {
    if (const auto text = read_text(d + "/memory.max"))
      if (const auto limit = parse_limit(*text)) r.limit = std::min(r.limit.value_or(*limit), *limit);
    const std::string up = parent_of(d);
    if (up == d) break;
    d = up;
  }
  r.peak = read_number(dir + "/memory.peak");
  if (const auto events = read_text(dir + "/memory.events")) r.oom_kills = keyed_value(*events, "oom_kill");
  return r;
}

}  // namespace cxxrun::agent
