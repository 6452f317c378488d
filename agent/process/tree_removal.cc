#include "agent/process/tree_removal.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <system_error>
#include <thread>
#include <vector>

namespace cxxrun::agent {

namespace fs = std::filesystem;

bool remove_tree(const std::string& root, int threads) {
  std::error_code ec;
  if (root.empty() || !fs::exists(fs::symlink_status(root, ec))) return true;
  // Every directory by its depth; everything else removed as it is met.
  std::map<int, std::vector<std::string>, std::greater<>> levels;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (int seen = 0; !ec && it != end && seen < 1000000; it.increment(ec), ++seen) {
    const fs::file_status s = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(s))
      levels[it.depth()].push_back(it->path().string());
    else
      (void)unlink(it->path().c_str());
  }
  for (const auto& [depth, dirs] : levels) {
    std::atomic<size_t> next{0};
    auto work = [&, &dirs = dirs] {
      for (size_t i; (i = next++) < dirs.size();) (void)rmdir(dirs[i].c_str());
    };
    std::vector<std::jthread> helpers;
    const int extra = std::min<int>(threads, static_cast<int>(dirs.size())) - 1;
    for (int t = 0; t < extra; ++t) helpers.emplace_back(work);
    work();
  }
  (void)rmdir(root.c_str());
  // Whatever the walk missed (made meanwhile, or a failed walk) goes the
  // plain way.
  fs::remove_all(root, ec);
  return !fs::exists(fs::symlink_status(root, ec));
}

}  // namespace cxxrun::agent
