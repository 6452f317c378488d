#include "agent/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdlib>

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

}  // namespace cxxrun::agent
