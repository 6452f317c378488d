#include "worker_runtime/error_file.h"
#include "common/env_names.h"

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
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
  std::ofstream out(path);
  out << doc.dump();
  return static_cast<bool>(out);
}

}  // namespace cxxrun::worker
