#include "worker_runtime/error_file.h"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace cxxrun::worker {

bool write_error_file(const std::string& message, const std::string& details) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!path || !*path) return false;
  nlohmann::json extra = {{"timestamp", std::to_string(std::time(nullptr))}};
  if (!details.empty()) extra["py_callstack"] = details;
  nlohmann::json doc = {{"message", {{"message", message}, {"extraInfo", extra}}}};
  std::ofstream out(path);
  out << doc.dump();
  return static_cast<bool>(out);
}

}  // namespace cxxrun::worker
