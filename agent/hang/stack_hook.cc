#include "agent/hang/stack_hook.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <sstream>

#include "agent/process/process_tree.h"

namespace cxxrun::agent {
namespace {

bool read_proc(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && out.size() < (1 << 16)) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return true;
}

// The fields of /proc/<pid>/stat after the command name ("S 1 ..."), whose
// first is field 3; "" when gone.
std::vector<std::string> stat_fields(pid_t pid) {
  std::string text;
  if (!read_proc("/proc/" + std::to_string(pid) + "/stat", text)) return {};
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return {};
  std::istringstream in(text.substr(close_paren + 1));
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

pid_t parent_of(pid_t pid) {
  const auto f = stat_fields(pid);
  return f.size() > 1 ? static_cast<pid_t>(std::atol(f[1].c_str())) : 0;
}

// The worker or one of its descendants; bounded, as a tree is not deep.
bool in_tree(pid_t pid, pid_t worker) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == worker) return true;
    pid = parent_of(pid);
  }
  return false;
}

// A hex mask of /proc/<pid>/status ("SigCgt:\t0000000180004002").
bool mask_has(const std::string& status, const char* name, int sig) {
  const std::string key = std::string("\n") + name + ":";
  const auto at = status.find(key);
  if (at == std::string::npos) return false;
  const unsigned long long mask = std::strtoull(status.c_str() + at + key.size(), nullptr, 16);
  return sig >= 1 && sig <= 64 && ((mask >> (sig - 1)) & 1) != 0;
}

}  // namespace

std::vector<HookRegistration> hook_registrations(const std::string& text) {
  static const std::regex on(R"re(^cxxrun: stack dump on signal (\d+) for pid (\d+)$)re");
  static const std::regex where(R"re(^cxxrun: pid (\d+) started at (\d+) dumps to fd (\d+)$)re");
  static const std::regex off(R"re(^cxxrun: stack dump off for pid (\d+)( .*)?$)re");
  std::vector<HookRegistration> found;
  auto last_of = [&found](pid_t pid) -> HookRegistration* {
    for (auto it = found.rbegin(); it != found.rend(); ++it)
      if (it->pid == pid) return &*it;
    return nullptr;
  };
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cxxrun: ", 0) != 0) continue;
    std::smatch m;
    if (std::regex_match(line, m, on)) {
      HookRegistration r;
      r.signal = std::stoi(m[1]);
      r.pid = static_cast<pid_t>(std::stol(m[2]));
      found.push_back(r);
    } else if (std::regex_match(line, m, where)) {
      if (HookRegistration* r = last_of(static_cast<pid_t>(std::stol(m[1])))) {
        r->start = std::stoull(m[2]);
        r->fd = std::stoi(m[3]);
      }
    } else if (std::regex_match(line, m, off)) {
      if (HookRegistration* r = last_of(static_cast<pid_t>(std::stol(m[1])))) r->off = true;
    }
  }
  return found;
}

std::string why_not_signal(const HookRegistration& r, pid_t worker, const std::string& stacks_file) {
  const std::string who = "pid " + std::to_string(r.pid);
  if (r.pid <= 1) return who + " is no process of the job";
  if (r.fd < 0 || r.start == 0) return who + "'s registration does not say where it started or which descriptor it writes";
  if (r.off) return who + " set its own handler for signal " + std::to_string(r.signal);
  const unsigned long long start = process_start_time(r.pid);
  if (start == 0) return who + " is gone";
  if (start != r.start)
    return who + " is no longer the process that registered (started at " + std::to_string(r.start) + ", now " +
           std::to_string(start) + ")";
  if (!in_tree(r.pid, worker)) return who + " is not in worker pid " + std::to_string(worker) + "'s tree";
  struct stat held {}, file {};
  if (::stat(("/proc/" + std::to_string(r.pid) + "/fd/" + std::to_string(r.fd)).c_str(), &held) != 0 ||
      ::stat(stacks_file.c_str(), &file) != 0 || held.st_dev != file.st_dev || held.st_ino != file.st_ino)
    return who + "'s descriptor " + std::to_string(r.fd) + " is no longer its stacks file";
  std::string status;
  if (!read_proc("/proc/" + std::to_string(r.pid) + "/status", status)) return who + " is gone";
  if (mask_has(status, "SigIgn", r.signal)) return who + " ignores signal " + std::to_string(r.signal);
  if (mask_has(status, "SigBlk", r.signal)) return who + " blocks signal " + std::to_string(r.signal);
  if (!mask_has(status, "SigCgt", r.signal))
    return who + " no longer handles signal " + std::to_string(r.signal) + " (its default action would end it)";
  // The start time again: the pid may have been freed and taken while the
  // checks above ran.
  if (process_start_time(r.pid) != r.start) return who + " is gone";
  return "";
}

}  // namespace cxxrun::agent
