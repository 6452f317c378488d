#include "agent/straggler/cpu_throttling.h"

#include <charconv>
#include <fstream>

#include "agent/forensics/memory_cgroup.h"
#include "agent/process/proc_cgroup.h"
#include "agent/straggler/small_file.h"

namespace cxxrun::agent {
namespace {

using std::string_view;

// The value of `key` in "key value" lines; nullopt when absent.
std::optional<unsigned long long> keyed(string_view text, string_view key) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const string_view line = text.substr(0, nl);
    text.remove_prefix(nl == string_view::npos ? text.size() : nl + 1);
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ') continue;
    const string_view value = line.substr(key.size() + 1);
    unsigned long long n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec == std::errc()) return n;
  }
  return std::nullopt;
}


}  // namespace

std::optional<CpuThrottle> parse_cpu_stat(string_view text) {
  CpuThrottle t;
  if (const auto usec = keyed(text, "throttled_usec")) {
    t.throttled_ns = *usec * 1000;
  } else if (const auto ns = keyed(text, "throttled_time")) {
    t.throttled_ns = *ns;
  } else {
    return std::nullopt;
  }
  t.nr_throttled = keyed(text, "nr_throttled").value_or(0);
  return t;
}


CpuCgroups CpuCgroups::detect(const std::string& mountinfo, const std::string& proc) {
  CpuCgroups c;
  c.proc_ = proc;
  std::ifstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    const auto entry = parse_mountinfo_line(line);
    if (!entry) continue;
    if (c.v1_.mount.empty() && entry->fstype == "cgroup" && lists(entry->super_options, "cpu"))
      c.v1_ = {entry->mount_point, entry->root};
    if (c.v2_.mount.empty() && entry->fstype == "cgroup2") c.v2_ = {entry->mount_point, entry->root};
  }
  return c;
}

std::string CpuCgroups::directory(const Mount& m, const std::string& path) {
  if (m.mount.empty()) return "";
  std::string rel = path;
  if (!m.root.empty() && m.root != "/") {
    const bool under = rel.compare(0, m.root.size(), m.root) == 0 &&
                       (rel.size() == m.root.size() || rel[m.root.size()] == '/');
    if (!under) return "";
    rel = rel.substr(m.root.size());
  }
  if (rel.find("/..") != std::string::npos) return "";  // outside what this mount shows
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  return m.mount + rel;
}

void CpuCgroups::chain(const Mount& m, const std::string& path, std::vector<std::string>& out) {
  std::string dir = directory(m, path);
  if (dir.empty()) return;
  // The mount's own directory is a limit only when the mount shows a
  // subtree (a container's cgroup, which its host may cap).
  const bool root_mount = m.root.empty() || m.root == "/";
  for (int depth = 0; depth < 64 && dir.size() >= m.mount.size(); ++depth) {
    if (dir == m.mount && root_mount) break;
    out.push_back(dir);
    if (dir == m.mount) break;
    dir.resize(dir.rfind('/'));
  }
}

std::optional<CpuCgroups::Of> CpuCgroups::of(pid_t pid) const {
  const auto text = read_small_file(proc_ + "/" + std::to_string(pid) + "/cgroup", 8192);
  if (!text) return std::nullopt;
  Of of;
  if (const auto v1 = cgroup_path(*text, "cpu")) chain(v1_, *v1, of.cpu);
  if (const auto v2 = cgroup_path(*text, "")) {
    of.v2 = directory(v2_, *v2);
    chain(v2_, *v2, of.cpu);
  }
  return of;
}

std::optional<CpuThrottle> CpuCgroups::read(const std::string& dir) {
  const auto text = read_small_file(dir + "/cpu.stat", 1024);
  return text ? parse_cpu_stat(*text) : std::nullopt;
}

}  // namespace cxxrun::agent
