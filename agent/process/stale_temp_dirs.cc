#include "agent/process/stale_temp_dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "agent/process/private_files.h"
#include "agent/process/process_tree.h"
#include "agent/process/tree_removal.h"

namespace cxxrun::agent {
namespace {

// The inode of this process's pid namespace, or 0 where it cannot be read.
unsigned long long pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

// Reads one decimal number at `at` followed by `end` (or the name's end
// when `end` is 0); false when there is none.
bool number(const char*& at, char end, unsigned long long& out) {
  if (*at < '0' || *at > '9') return false;
  char* after = nullptr;
  errno = 0;
  out = strtoull(at, &after, 10);
  if (errno != 0 || *after != end) return false;
  at = after + (end ? 1 : 0);
  return true;
}

struct Owner {
  unsigned long long ns = 0, pid = 0, start = 0;
};

// "<prefix><ns>-<pid>-<start>-XXXXXX" → its owner; false for any other name.
bool parse(const std::string& name, const std::string& prefix, Owner& owner) {
  if (name.rfind(prefix, 0) != 0) return false;
  const char* at = name.c_str() + prefix.size();
  if (!number(at, '-', owner.ns) || !number(at, '-', owner.pid) || !number(at, '-', owner.start)) return false;
  return std::char_traits<char>::length(at) == 6 && owner.pid > 0 && owner.pid < (1ULL << 31);
}

}  // namespace

std::string owned_temp_template(const std::string& dir, const std::string& prefix) {
  const pid_t pid = ::getpid();
  return dir + "/" + prefix + std::to_string(pid_namespace()) + "-" + std::to_string(pid) + "-" +
         std::to_string(process_start_time(pid)) + "-XXXXXX";
}

int remove_stale_temp_dirs(const std::string& dir, const std::string& prefix) {
  const unsigned long long ns = pid_namespace();
  // In a directory others can change (writable without the sticky bit, or
  // under one that is), they could put a link where a checked directory
  // stood, between the check and its removal.
  if (ns == 0 || !replaceable_by_others(dir).empty()) return 0;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return 0;
  }
  std::vector<std::string> stale;
  // Bounded: a directory's entries, once each.
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    Owner owner;
    if (!parse(name, prefix, owner) || owner.ns != ns) continue;
    // The entry itself, not what a link names: another user's entry, or a
    // link, stays. In a sticky directory (/tmp, /dev/shm) only its owner
    // can rename or replace an entry, so what is checked here is what goes.
    struct stat st {};
    if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    const unsigned long long start = process_start_time(static_cast<pid_t>(owner.pid));
    if (start == owner.start) continue;  // its agent lives
    stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  int removed = 0;
  // remove_tree removes links inside, never follows them.
  for (const std::string& path : stale) removed += remove_tree(path, 1) ? 1 : 0;
  return removed;
}

}  // namespace cxxrun::agent
