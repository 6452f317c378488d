#include "worker_runtime/error_file.h"
#include "common/env_names.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

namespace cxxrun::worker {

bool write_error_file(const std::string& message, const std::string& details) {
  const char* path = std::getenv(cxxrun::env::kErrorFile);
  if (!path || !*path) return false;
  // torch's whole-second "timestamp", plus nanoseconds: when two ranks fail
  // in the same second (one because the other died), the launcher can tell
  // which came first.
  const auto now = std::chrono::system_clock::now();
  nlohmann::json extra = {
      {"timestamp", std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count())},
      {"timestamp_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()}};
  if (!details.empty()) extra["py_callstack"] = details;
  nlohmann::json doc = {{"message", {{"message", message}, {"extraInfo", extra}}}};
  // 0600 and never through a link, as everything in the run directory
  // (agent/process/private_files.h, which a worker cannot include).
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string text = doc.dump();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 && done == text.size();
}

}  // namespace cxxrun::worker
