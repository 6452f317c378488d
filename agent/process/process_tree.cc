#include "agent/process/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <map>

namespace cxxrun::agent {
namespace {

bool read_file(const std::string& path, std::string& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  close(fd);
  return true;
}

bool is_zombie(const std::string& proc_dir) {
  std::string stat;
  if (!read_file(proc_dir + "/stat", stat)) return true;
  // The state follows the ")" that ends the command name.
  auto close_paren = stat.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= stat.size() || stat[close_paren + 2] == 'Z';
}

bool environ_has(const std::string& environ, const std::string& prefix) {
  for (size_t pos = 0; pos < environ.size();) {
    size_t end = environ.find('\0', pos);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(pos, prefix.size(), prefix) == 0 && end - pos >= prefix.size()) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

std::vector<pid_t> find_processes_with_env(const std::string& token_prefix) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  const pid_t self = getpid();
  std::string environ;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    std::string dir = std::string("/proc/") + e->d_name;
    if (!read_file(dir + "/environ", environ) || !environ_has(environ, token_prefix)) continue;
    if (!is_zombie(dir)) found.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return found;
}

int signal_processes_with_env(const std::string& token_prefix, int sig) {
  int n = 0;
  for (pid_t pid : find_processes_with_env(token_prefix))
    if (kill(pid, sig) == 0) ++n;
  return n;
}

std::vector<pid_t> find_descendants(pid_t root, const std::vector<pid_t>& except) {
  std::map<pid_t, std::vector<pid_t>> children;
  DIR* proc = opendir("/proc");
  if (!proc) return {};
  std::string stat;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    if (!read_file(dir + "/stat", stat)) continue;
    // "pid (comm) state ppid ...": the command name may hold anything.
    const auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= stat.size() || stat[close_paren + 2] == 'Z') continue;
    const long ppid = strtol(stat.c_str() + close_paren + 4, nullptr, 10);
    children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  std::vector<pid_t> found;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      if (std::find(except.begin(), except.end(), c) != except.end()) continue;
      found.push_back(c);
      todo.push_back(c);
    }
  }
  return found;
}

std::map<pid_t, std::chrono::nanoseconds> tree_cpu_time(const std::vector<pid_t>& roots) {
  // Fields after "(comm) ": 1 state, 2 ppid, ... 12 utime, 13 stime, 14
  // cutime, 15 cstime, in clock ticks.
  static const long ticks = sysconf(_SC_CLK_TCK);
  std::map<pid_t, std::vector<pid_t>> children;
  std::map<pid_t, long long> own;
  if (DIR* proc = opendir("/proc")) {
    std::string stat;
    while (dirent* e = readdir(proc)) {
      char* end = nullptr;
      const long pid = strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      if (!read_file(std::string("/proc/") + e->d_name + "/stat", stat)) continue;
      const auto close_paren = stat.rfind(')');
      if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) continue;
      std::istringstream fields(stat.substr(close_paren + 2));
      std::string state;
      long long ppid = 0, skip = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
      fields >> state >> ppid;
      for (int i = 3; i <= 11; ++i) fields >> skip;
      fields >> utime >> stime >> cutime >> cstime;
      children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
      own[static_cast<pid_t>(pid)] = utime + stime + cutime + cstime;
    }
    closedir(proc);
  }
  std::map<pid_t, std::chrono::nanoseconds> out;
  for (pid_t root : roots) {
    long long total = 0;
    std::vector<pid_t> todo{root};
    for (size_t guard = 0; !todo.empty() && guard < 100000; ++guard) {
      const pid_t p = todo.back();
      todo.pop_back();
      total += own.count(p) ? own[p] : 0;
      for (pid_t c : children[p]) todo.push_back(c);
    }
    out[root] = std::chrono::nanoseconds(total * 1'000'000'000LL / (ticks > 0 ? ticks : 100));
  }
  return out;
}

namespace {

std::string_view state_words(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "uninterruptible sleep";
    case 'Z': return "zombie: exited, not yet reaped";
    case 'T': return "stopped by a signal";
    case 't': return "stopped by a debugger";
    case 'X': return "dead";
    case 'I': return "idle";
  }
  return "unknown";
}

}  // namespace

std::string wait_state(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream stat(dir + "/stat");
  std::string text;
  std::getline(stat, text);
  // "pid (comm) S ...": comm may hold spaces and parentheses.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return "its /proc entry is gone";
  const char state = text[close + 2];
  std::string out = std::string("state ") + state + " (" + std::string(state_words(state)) + ")";
  std::ifstream wchan(dir + "/wchan");
  std::string channel;
  std::getline(wchan, channel);
  if (channel.empty() || channel == "0")
    out += ", wait channel not shown by the kernel";
  else
    out += ", waiting in " + channel;
  return out;
}

unsigned long long process_start_time(pid_t pid) {
  std::string stat;
  if (!read_file("/proc/" + std::to_string(pid) + "/stat", stat)) return 0;
  // The command name (field 2) may hold spaces and parentheses: fields are
  // counted from the last ')'; starttime is field 22.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  size_t at = close + 1;
  for (int field = 3; field < 22; ++field) {
    at = stat.find(' ', at + 1);
    if (at == std::string::npos) return 0;
  }
  return std::strtoull(stat.c_str() + at + 1, nullptr, 10);
}

}  // namespace cxxrun::agent
