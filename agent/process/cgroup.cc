#include "agent/process/cgroup.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cxxrun::agent {
namespace {

// Where the cgroup2 hierarchy is mounted, from /proc/self/mountinfo (a hybrid
// layout keeps it at /sys/fs/cgroup/unified), and the root it shows.
bool cgroup2_mount(std::string& mount, std::string& root) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, dev;
    fields >> id >> parent >> dev >> root >> mount;
    return !mount.empty();
  }
  return false;
}

// This process's cgroup in the v2 hierarchy ("0::/path").
bool own_cgroup(std::string& path) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) {
      path = line.substr(3);
      return true;
    }
  return false;
}

bool write_text(const std::string& file, const char* text) {
  const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, strlen(text)) == static_cast<ssize_t>(strlen(text));
  close(fd);
  return ok;
}

}  // namespace

std::unique_ptr<JobCgroup> JobCgroup::create(const std::string& job_token, std::string& why_not,
                                             const std::function<void(const std::string&)>& before_made) {
  std::string mount, root, own;
  if (!cgroup2_mount(mount, root)) {
    why_not = "no cgroup2 mount in /proc/self/mountinfo";
    return nullptr;
  }
  if (!own_cgroup(own)) {
    why_not = "this process has no cgroup v2 entry in /proc/self/cgroup";
    return nullptr;
  }
  // A mount of a subtree shows paths below its own root.
  if (root != "/" && own.rfind(root, 0) == 0) own = own.substr(root.size());
  if (own.size() > 1 && own.find("/..") != std::string::npos) {
    why_not = "this process's cgroup " + own + " is outside the mounted cgroup2 tree";
    return nullptr;
  }
  const std::string parent = mount + (own == "/" ? "" : own);
  remove_stale_job_cgroups(parent);
  std::string path = parent + "/" + job_cgroup_name(job_token);
  if (before_made) before_made(path);
  if (mkdir(path.c_str(), 0755) != 0) {
    why_not = "cannot create " + path + ": " + strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (stat((path + "/cgroup.kill").c_str(), &st) != 0) {
    rmdir(path.c_str());
    why_not = "the kernel has no cgroup.kill (Linux 5.14 or later needed)";
    return nullptr;
  }
  return std::unique_ptr<JobCgroup>(new JobCgroup(path));
}

JobCgroup::~JobCgroup() {
  end_attempt();
  // Waits, briefly, for every attempt's directory to empty.
  if (kill_and_remove_cgroup(path_, abandoned_ ? std::chrono::milliseconds(0) : std::chrono::seconds(5))) return;
  if (abandoned_)
    fprintf(stderr, "cxxrun: leaving cgroup %s behind: an unkillable process is still in it; it can be removed "
                    "(rmdir) once that process is gone\n", path_.c_str());
}

namespace {

// Fills `target` with descriptors of the cgroup at `dir`, made if need be.
void open_target(const std::string& dir, CgroupTarget& target) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create the cgroup " + dir + ": " + strerror(errno));
  target.dir = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  target.procs = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (target.dir < 0 || target.procs < 0) throw std::runtime_error("cannot open the cgroup " + dir + ": " + strerror(errno));
}

}  // namespace

CgroupTarget JobCgroup::begin_attempt(int attempt) {
  end_attempt();
  sweep();
  attempt_ = path_ + "/attempt-" + std::to_string(attempt);
  open_target(attempt_, target_);
  return target_;
}

CgroupTarget JobCgroup::open_child(const std::string& name) {
  CgroupTarget target;
  try {
    open_target(path_ + "/" + name, target);
  } catch (...) {
    close_target(target);
    throw;
  }
  return target;
}

std::vector<pid_t> JobCgroup::attempt_pids() const {
  std::vector<pid_t> pids;
  if (attempt_.empty()) return pids;
  std::ifstream in(attempt_ + "/cgroup.procs");
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

void JobCgroup::kill_attempt() const {
  if (!attempt_.empty()) write_text(attempt_ + "/cgroup.kill", "1");
}

void JobCgroup::end_attempt() {
  close_target(target_);
  if (attempt_.empty()) return;
  kill_attempt();
  finished_.push_back(attempt_);
  attempt_.clear();
}

void JobCgroup::sweep() {
  std::vector<std::string> busy;
  for (const std::string& dir : finished_)
    if (rmdir(dir.c_str()) != 0 && errno == EBUSY) busy.push_back(dir);
  finished_ = std::move(busy);
}

namespace {

// One pass over the tree, children first: rmdir needs a cgroup with no
// children and no processes; with `kill`, each is killed first. True once
// `path` is gone.
bool remove_once(const std::string& path, bool kill) {
  if (kill) write_text(path + "/cgroup.kill", "1");
  if (DIR* dir = opendir(path.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = readdir(dir))
      if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(path + "/" + e->d_name);
    closedir(dir);
    for (const std::string& child : children) remove_once(child, kill);
  }
  return rmdir(path.c_str()) == 0 || errno == ENOENT;
}

}  // namespace

std::string job_cgroup_name(const std::string& job_token) {
  return "cxxrun-" + std::to_string(getpid()) + "-" + job_token;
}

void remove_stale_job_cgroups(const std::string& parent) {
  DIR* dir = opendir(parent.c_str());
  if (!dir) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (e->d_type != DT_DIR || name.rfind("cxxrun-", 0) != 0) continue;
    char* end = nullptr;
    const long pid = strtol(name.c_str() + 7, &end, 10);
    if (pid <= 0 || *end != '-') continue;  // not "cxxrun-<pid>-<job>"
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(parent + "/" + name);
  }
  closedir(dir);
  for (const std::string& path : stale) remove_once(path, /*kill=*/false);  // what is busy stays
}

bool kill_and_remove_cgroup(const std::string& path, std::chrono::milliseconds limit) {
  // A kill takes a moment to empty a cgroup, longer on a loaded machine: the
  // whole pass again (kill included, for a child made meanwhile) until the
  // tree is gone, for up to `limit`.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (remove_once(path, /*kill=*/true)) return true;
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) return false;
    usleep(5000);
  }
}

}  // namespace cxxrun::agent
