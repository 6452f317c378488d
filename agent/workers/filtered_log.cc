#include "agent/workers/filtered_log.h"

#include <errno.h>

#include <cstring>

#include <spdlog/spdlog.h>

#include "agent/process/private_files.h"

namespace cxxrun::agent {

FilteredLog::FilteredLog(std::vector<std::string> filters, const std::string& path)
    : filters_(std::move(filters)), path_(path) {
  file_ = open_private_stream(path);  // 0600, never through a link
  if (!file_) spdlog::warn("cannot create {}: {}; filtered lines are not copied", path_, std::strerror(errno));
}

FilteredLog::~FilteredLog() {
  if (file_) std::fclose(file_);
}

bool FilteredLog::matches(std::string_view line) const {
  for (const std::string& f : filters_)
    if (line.find(f) != std::string_view::npos) return true;
  return false;
}

void FilteredLog::line(std::string_view prefix, std::string_view line) {
  if (!file_ || !matches(line)) return;
  // Several ranks write here: each line goes out whole, at once.
  std::string out;
  out.reserve(prefix.size() + line.size() + 1);
  out.append(prefix).append(line).push_back('\n');
  std::fwrite(out.data(), 1, out.size(), file_);
  std::fflush(file_);
}

}  // namespace cxxrun::agent
