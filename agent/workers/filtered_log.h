// torch's --duplicate-stdout-filters / --duplicate-stderr-filters: the lines
// of tee'd worker streams that contain any of the filter strings are also
// written, each with its rank's console prefix, to one file per stream kind
// for the whole attempt (attempt_<n>/filtered_stdout.log, filtered_stderr.log),
// so a grep-able digest of every rank's "loss=" or "ERROR" lines exists
// without merging per-rank files.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

class FilteredLog {
 public:
  // Creates `path` (empty until a line matches). A file that cannot be
  // opened is one warning, then nothing.
  FilteredLog(std::vector<std::string> filters, const std::string& path);
  ~FilteredLog();
  FilteredLog(const FilteredLog&) = delete;
  FilteredLog& operator=(const FilteredLog&) = delete;

  bool matches(std::string_view line) const;
  // One whole line, without its '\n'; written only when it matches.
  void line(std::string_view prefix, std::string_view line);

 private:
  std::vector<std::string> filters_;
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace cxxrun::agent
