#include "agent/straggler/small_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

namespace cxxrun::agent {

std::optional<std::string> read_small_file(const std::string& path, std::size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text(limit, '\0');
  std::size_t got = 0;
  // A /proc file fills one read when it is small; the loop is bounded by
  // `limit`, and a read error (the task exited between open and read)
  // makes the whole file unknown.
  while (got < limit) {
    const ssize_t n = ::read(fd, text.data() + got, limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace cxxrun::agent
