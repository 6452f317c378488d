// --checkpoint-dir: a new file or directory appearing directly in the
// directory while an attempt runs is a checkpoint. The directory is read,
// never watched (inotify does not see writes from another node to a shared
// filesystem): the tracker polls it once a second, and once more as the
// attempt ends so a checkpoint written just before a crash counts.
//
// The directory need not exist: the job may make it. Names beginning with
// '.' are skipped (where writers put a checkpoint before renaming it into
// place). A poll reads at most kMaxEntries names, so a huge directory costs
// a bounded amount per second; past that, later names are not seen.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

// The step a checkpoint's name holds: its last number, not counting an
// extension that has a letter in it (".pt", ".h5", ".pt2"), so
// "ckpt-000300.pt" is 300, "step_30" is 30, "model-300.h5" is 300 and
// "model.pt" none. A number past 64 bits is none.
std::optional<uint64_t> step_of_checkpoint_name(std::string_view name);

class CheckpointDir {
 public:
  static constexpr std::size_t kMaxEntries = 10000;

  explicit CheckpointDir(std::string path);

  struct Found {
    std::string name;
    std::optional<uint64_t> step;
    // When it was last written (its mtime; a directory's, when its last
    // entry came): the checkpoint's time, which a poll a second apart would
    // otherwise put up to a second late, or after a crash. nullopt: unknown.
    std::optional<std::chrono::system_clock::time_point> written;
  };
  // A new attempt: what is in the directory now is old.
  void reset();
  // The names that appeared since the last reset() or poll(), in name order.
  std::vector<Found> poll();

  const std::string& path() const { return path_; }

 private:
  std::vector<std::string> list() const;

  std::string path_;
  std::set<std::string> known_;
};

}  // namespace cxxrun::agent
