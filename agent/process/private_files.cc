#include "agent/process/private_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

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

namespace {

// `path`'s directory and each one above it, as written: "/a/b" gives "/a/b",
// "/a", "/" (a relative path is taken from the current directory).
std::vector<std::string> chain(std::string path) {
  if (path.empty() || path[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return {};
    path = std::string(cwd) + "/" + path;
  }
  std::vector<std::string> out;
  for (int depth = 0; depth < 256; ++depth) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    out.push_back(path);
    if (path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

bool others_can_change(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return true;
  if (st.st_uid != ::geteuid() && st.st_uid != 0) return true;
  return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0;
}

}  // namespace

std::string replaceable_by_others(const std::string& dir) {
  std::vector<std::string> dirs = chain(dir);
  if (dirs.empty()) return dir;
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return dir;
  for (const std::string& d : chain(real)) dirs.push_back(d);
  for (const std::string& d : dirs)
    if (others_can_change(d)) return d;
  return "";
}

std::string safe_temp_base() {
  const char* tmpdir = ::getenv("TMPDIR");
  for (const char* base : {tmpdir, "/tmp", "/dev/shm"})
    if (base && *base && ::access(base, W_OK | X_OK) == 0 && replaceable_by_others(base).empty()) return base;
  return "";
}

std::string trusted_program(const std::string& name) {
  const char* path = ::getenv("PATH");
  const std::string entries = path ? path : "/bin:/usr/bin";
  size_t at = 0;
  for (int n = 0; n < 1024 && at <= entries.size(); ++n) {
    size_t end = entries.find(':', at);
    if (end == std::string::npos) end = entries.size();
    const std::string dir = entries.substr(at, end - at);
    at = end + 1;
    if (dir.empty() || dir[0] != '/') continue;
    const std::string file = dir + "/" + name;
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(file.c_str(), X_OK) != 0) continue;
    if (replaceable_by_others(dir).empty()) return file;
  }
  return "";
}

int open_named_file(const std::string& path, int flags, std::string& why) {
  int fd = ::open(path.c_str(), flags | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ELOOP) {
    struct stat link {};
    if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) {
      errno = ELOOP;
      why = std::strerror(errno);
      return -1;
    }
    if (link.st_uid != ::geteuid() && link.st_uid != 0) {
      why = "it is a symbolic link of another user's (uid " + std::to_string(link.st_uid) + "), not followed";
      errno = ELOOP;
      return -1;
    }
    fd = ::open(path.c_str(), flags, 0600);
  }
  if (fd < 0) why = std::strerror(errno);
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
