#include "agent/progress/checkpoint_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "agent/progress/progress_pattern.h"

namespace cxxrun::agent {

std::optional<uint64_t> step_of_checkpoint_name(std::string_view name) {
  // An extension with a letter is a file type, not a step: ".h5" must not
  // make every Keras checkpoint step 5.
  const auto dot = name.rfind('.');
  if (dot != std::string_view::npos && dot > 0) {
    const auto ext = name.substr(dot + 1);
    if (std::any_of(ext.begin(), ext.end(), [](char c) { return (c < '0' || c > '9'); }))
      name = name.substr(0, dot);
  }
  auto end = name.size();
  while (end > 0 && (name[end - 1] < '0' || name[end - 1] > '9')) --end;
  if (end == 0) return std::nullopt;
  auto begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
  return step_of_capture(name.substr(begin, end - begin));
}

CheckpointDir::CheckpointDir(std::string path) : path_(std::move(path)) {}

std::vector<std::string> CheckpointDir::list() const {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path_.c_str()), closedir);
  if (!dir) return names;  // not made yet, or gone: nothing in it
  while (names.size() < kMaxEntries) {
    const dirent* e = readdir(dir.get());
    if (e == nullptr) break;
    if (e->d_name[0] == '.') continue;  // ".", "..", and hidden names written before a rename
    names.emplace_back(e->d_name);
  }
  return names;
}

void CheckpointDir::reset() {
  known_.clear();
  for (auto& name : list()) known_.insert(std::move(name));
}

std::vector<CheckpointDir::Found> CheckpointDir::poll() {
  std::vector<Found> found;
  for (auto& name : list()) {
    if (known_.count(name) > 0) continue;
    Found f{name, step_of_checkpoint_name(name), std::nullopt};
    struct stat st {};
    if (::fstatat(AT_FDCWD, (path_ + "/" + name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      f.written = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    found.push_back(std::move(f));
    known_.insert(std::move(name));
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.name < b.name; });
  return found;
}

}  // namespace cxxrun::agent
