#include "agent/private_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace cxxrun::agent {

bool make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0) return false;
  // The umask may have taken bits 0700 needs (umask 077 keeps them, 777
  // does not); mkdir never follows a link, and what we just made is ours.
  return ::chmod(path.c_str(), 0700) == 0;
}

bool ensure_private_dir(const std::string& path, std::string& why_not) {
  if (make_private_dir(path)) return true;
  if (errno != EEXIST) {
    why_not = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    why_not = "cannot use " + path + ": " + (errno == ELOOP || errno == ENOTDIR ? "not a directory of this user's (a link or a file)" : std::strerror(errno));
    return false;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  if (ok && st.st_uid != ::geteuid()) {
    why_not = "cannot use " + path + ": it belongs to uid " + std::to_string(st.st_uid) + ", not to this user";
    ok = false;
  } else if (ok && ::fchmod(fd, 0700) != 0) {
    why_not = "cannot make " + path + " private: " + std::strerror(errno);
    ok = false;
  }
  ::close(fd);
  return ok;
}

bool make_private_dirs(const std::string& path, std::string& why_not) {
  // Parents first, from the top; one component at a time, so each one made
  // is made 0700.
  std::string prefix;
  size_t at = 0;
  for (int depth = 0; depth < 256 && at != std::string::npos; ++depth) {
    at = path.find('/', at + 1);
    prefix = path.substr(0, at);
    if (prefix.empty() || prefix == "/") continue;
    if (make_private_dir(prefix)) continue;
    // Something there: a file in the way shows at the next component
    // (ENOTDIR), or below for the last one.
    if (errno == EEXIST) continue;
    why_not = "cannot create directory " + prefix + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    why_not = "cannot create directory " + path + ": " + std::strerror(ENOTDIR);
    return false;
  }
  return true;
}

int open_private_file(const std::string& path, bool fresh, bool truncate) {
  // O_NONBLOCK: a FIFO planted at `path` must not hold the open until a
  // reader comes; it is refused below, and the flag cleared for a file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (fresh ? O_EXCL : 0), 0600);
  if (fd < 0) return -1;
  auto fail = [fd](int e) {
    ::close(fd);
    errno = e;
    return -1;
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(errno);
  // A character device (/dev/null, /dev/full) only root can make: it is
  // used as it is, its mode untouched.
  if (S_ISCHR(st.st_mode)) return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fd : fail(errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return fail(EPERM);
  if (::fchmod(fd, 0600) != 0 || (truncate && ::ftruncate(fd, 0) != 0)) return fail(errno);
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) return fail(errno);
  return fd;
}

std::FILE* open_private_stream(const std::string& path) {
  const int fd = open_private_file(path, false, true);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) {
    const int e = errno;
    ::close(fd);
    errno = e;
  }
  return f;
}

bool write_private_file(const std::string& path, const std::string& text, bool fresh, std::string& why_not) {
  const int fd = open_private_file(path, fresh, true);
  if (fd < 0) {
    why_not = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why_not = "cannot write " + path + ": " + std::strerror(n < 0 ? errno : ENOSPC);
      ::close(fd);
      return false;
    }
    data += n, left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    why_not = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace cxxrun::agent
