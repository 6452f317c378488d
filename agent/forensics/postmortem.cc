#include "agent/forensics/postmortem.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "agent/process/cgroup.h"
#include "agent/forensics/kernel_log.h"
#include "agent/forensics/memory_cgroup.h"

namespace cxxrun::agent {
namespace {

// Signals whose fault the kernel logs with its address (SIGABRT is the
// process's own doing: no kernel line).
bool kernel_reports_fault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Whether `pid` is still running: not ended (a zombie), not gone.
bool alive(pid_t pid) {
  const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
  const size_t end = stat.rfind(") ");
  return end != std::string::npos && end + 2 < stat.size() && stat[end + 2] != 'Z' && stat[end + 2] != 'X';
}

std::string link_target(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The cgroup, `dir` or an ancestor below `mount`, whose own limit is
// `limit`: where an admin or a scheduler set it.
std::string limit_owner(std::string dir, long long limit, const std::string& mount) {
  while (dir.size() > mount.size() && dir.rfind(mount, 0) == 0) {
    for (const char* file : {"/memory.limit_in_bytes", "/memory.max"})
      if (auto own = parse_limit(first_line(dir + file)); own && *own == limit) return dir;
    dir.erase(dir.rfind('/'));
  }
  return "";
}

long long core_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_CORE, &r) != 0) return -1;
  return r.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long long>(r.rlim_cur);
}

}  // namespace

std::string core_text(bool dumped, const std::string& pattern, pid_t pid, const std::string& comm,
                      const std::string& cwd, long long limit) {
  if (!dumped) return limit == 0 ? "no core file: the core size limit is 0 (ulimit -c)" : "";
  if (pattern.empty()) return "";
  if (pattern[0] == '|') {
    const std::string program = pattern.substr(1, pattern.find(' ') == std::string::npos ? std::string::npos
                                                                                         : pattern.find(' ') - 1);
    const bool systemd = program.find("systemd-coredump") != std::string::npos;
    return "piped to " + program + (systemd ? " (coredumpctl info " + std::to_string(pid) + ")" : "");
  }
  // The specifiers a path can be rebuilt from; any other leaves the pattern.
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      path += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'p':
      case 'P': path += std::to_string(pid); break;
      case 'e': path += comm; break;
      case '%': path += '%'; break;
      default: return "to kernel.core_pattern " + pattern;
    }
  }
  // kernel.core_uses_pid adds ".pid" to a pattern without %p.
  if (pattern.find("%p") == std::string::npos && first_line("/proc/sys/kernel/core_uses_pid") == "1")
    path += "." + std::to_string(pid);
  if (path[0] != '/') path = (cwd.empty() ? "." : cwd) + "/" + path;
  return "to " + path;
}

bool had_reaped_children(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  return had_reaped_children(in);
}

bool had_reaped_children(std::istream& stat_file) {
  // One line; getline, unlike an istreambuf_iterator, turns the filebuf's
  // exception into a failed stream.
  std::string stat;
  std::getline(stat_file, stat);
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return false;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  long long cminflt = 0, cmajflt = 0;
  // state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  for (int i = 0; i < 11 && fields >> field; ++i) {
    if (i == 8) cminflt = std::atoll(field.c_str());
    if (i == 10) cmajflt = std::atoll(field.c_str());
  }
  return cminflt + cmajflt > 0;
}

std::string missing_fault_line(const Failure& f) {
  // A handler that printed the stacks, then raised the signal again: the
  // kernel logs a fault only when no handler takes it.
  if (f.traceback.starts_with("Fatal Python error: "))
    return "fault address unknown: Python's faulthandler caught the " + signal_name(f.signal) +
           " and raised it again, so the kernel logged no fault line";
  return "fault address unknown: no kernel fault line for pid " + std::to_string(f.pid) +
         " (the kernel logs one only for a fault no handler caught, under the id of the thread that faulted; a "
         "signal sent with kill leaves none)";
}

Postmortem::Postmortem(const std::string& job_token)
    : memory_(std::make_unique<MemoryCgroups>(MemoryCgroups::detect(job_token))) {
  kernel_ = KernelLog::open(no_kernel_log_);
  // Rank cgroups of agents that were killed with their guardian.
  if (memory_->hierarchy() == MemoryCgroups::Hierarchy::v1) remove_stale_job_cgroups(memory_->own_dir());
  if (memory_->hierarchy() == MemoryCgroups::Hierarchy::none) no_rank_cgroup_ = memory_->why();
}

Postmortem::~Postmortem() = default;

int Postmortem::rank_cgroup(int attempt, int local_rank) {
  if (memory_->hierarchy() != MemoryCgroups::Hierarchy::v1) {
    if (no_rank_cgroup_.empty()) no_rank_cgroup_ = "ranks share their memory cgroup (cgroup v2)";
    return -1;
  }
  std::string why;
  const int fd = memory_->make_rank(attempt, local_rank, why);
  if (fd < 0) no_rank_cgroup_ = why;
  if (fd < 0) {
    rank_cgroups_.erase(local_rank);
  } else {
    // Its OOM counter before the worker is in it: a worker that ended before
    // started() looked (its group forks every rank first) shows no cgroup
    // of its own any more, and a kill meanwhile must still count.
    RankCgroup& r = rank_cgroups_[local_rank];
    r.dir = memory_->tree() + "/attempt-" + std::to_string(attempt) + "/rank-" + std::to_string(local_rank);
    r.oom_kills = MemoryCgroups::read(r.dir, true).oom_kills.value_or(-1);
  }
  return fd;
}

void Postmortem::started(int local_rank, pid_t pid) {
  Watched w;
  const auto made = rank_cgroups_.find(local_rank);
  const auto dir = memory_->cgroup_of(pid);
  // Ended already (a zombie's cgroups read as the roots), or in the cgroup
  // made for it: that one, counted from before the worker joined it.
  if (made != rank_cgroups_.end() && (!dir || *dir == made->second.dir || !alive(pid))) {
    w.cgroup = made->second.dir;
    w.own = true;
    w.oom_kills_at_start = made->second.oom_kills;
  } else if (dir) {
    w.cgroup = *dir;
    // Made by rank_cgroup() for it alone.
    w.own = !memory_->job_dir().empty() && dir->rfind(memory_->job_dir() + "/", 0) == 0;
    if (auto kills = MemoryCgroups::read(w.cgroup, w.own).oom_kills) w.oom_kills_at_start = *kills;
  }
  w.comm = first_line("/proc/" + std::to_string(pid) + "/comm");
  w.cwd = link_target("/proc/" + std::to_string(pid) + "/cwd");
  watched_[pid] = w;
}

void Postmortem::sample(pid_t pid) {
  const auto it = watched_.find(pid);
  if (it == watched_.end()) return;
  if (DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
    // The threads it has now: one that faults later was among them for up to
    // a sample's time. Bounded, for a worker with very many.
    constexpr size_t kMaxThreads = 4096;
    std::set<pid_t> threads;
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.' && threads.size() < kMaxThreads) threads.insert(static_cast<pid_t>(std::atoi(e->d_name)));
    closedir(dir);
    it->second.threads = std::move(threads);
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) {
      const long long kib = std::atoll(line.c_str() + 6);
      if (kib > 0) it->second.own_peak = std::max(it->second.own_peak, kib * 1024);
      return;
    }
}

void Postmortem::examine(Failure& f, int status, long long peak_rss, bool of_children) {
  if (kernel_) kernel_->poll();
  const auto it = watched_.find(f.pid);
  const Watched w = it == watched_.end() ? Watched{} : it->second;
  if (it != watched_.end()) watched_.erase(it);

  MemoryEvidence& m = f.memory;
  m.peak_rss = peak_rss;
  m.peak_rss_of_children = of_children;
  if (of_children) m.own_peak_at_least = w.own_peak;
  long long new_kills = 0;
  if (!w.cgroup.empty()) {
    const MemoryReading r = MemoryCgroups::read(w.cgroup, w.own);
    m.cgroup = w.cgroup;
    m.limit = r.limit ? *r.limit : 0;
    if (r.limit) m.limit_set_on = limit_owner(w.cgroup, *r.limit, memory_->mount());
    // The rank's own cgroup holds its children too: their peak counts. A
    // shared one's peak is not this rank's.
    if (w.own && r.peak) m.peak = *r.peak;
    if (r.oom_kills && w.oom_kills_at_start >= 0) new_kills = *r.oom_kills - w.oom_kills_at_start;
  }
  if (f.signal == SIGKILL) {
    if (kernel_)
      if (auto e = kernel_->find(f.pid, KernelEvent::Kind::oom_kill)) {
        m.oom_killed = true;
        m.how_known = "named in the kernel log";
        m.kernel_line = e->text;
      }
    // The kernel counts the kill before it sends the signal.
    if (!m.oom_killed && w.own && new_kills > 0) {
      m.oom_killed = true;
      m.how_known = "counted by its own memory cgroup";
    }
    if (!m.oom_killed && !kernel_ && !w.own) {
      m.shared_oom_kills = new_kills;
      m.missing = (no_rank_cgroup_.empty() ? "no memory cgroup of its own" : no_rank_cgroup_) + "; " + no_kernel_log_;
    }
  } else if (w.own && new_kills > 0) {
    m.child_oom_kills = new_kills;  // a data loader, say: the worker lived on to fail
  }

  if (f.signal && kernel_reports_fault(f.signal)) {
    if (!kernel_)
      f.fault = "fault address unknown: " + no_kernel_log_;
    else if (auto e = kernel_->find(f.pid, KernelEvent::Kind::fault))
      f.fault = "kernel: " + e->text;
    else if (auto t = thread_fault(w))
      f.fault = "kernel: " + t->text + " (thread " + std::to_string(t->pid) + " of it)";
    else
      f.fault = missing_fault_line(f);
  }
  if (kernel_)
    for (pid_t tid : w.threads) kernel_->forget(tid);
  if (f.signal) {
    f.core_dumped = WCOREDUMP(status);
    f.core = core_text(f.core_dumped, first_line("/proc/sys/kernel/core_pattern"), f.pid, w.comm, w.cwd,
                       core_limit());
  }
  if (kernel_) kernel_->forget(f.pid);
}

std::optional<KernelEvent> Postmortem::thread_fault(const Watched& w) const {
  for (pid_t tid : w.threads)
    if (auto e = kernel_->find(tid, KernelEvent::Kind::fault)) return e;
  return std::nullopt;
}

void Postmortem::end_attempt(int attempt) { memory_->end_attempt(attempt); }

void Postmortem::abandon() { memory_->abandon(); }

std::string Postmortem::memory_dir() const { return memory_->tree(); }

}  // namespace cxxrun::agent
