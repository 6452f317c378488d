// Removing a directory tree the agent made (its temporary run directory, a
// private hook directory) at exit, as fast as the disk allows: a directory
// removed from a disk mounted with discard waits for the device (about 4 ms
// each on the bench machine, where a file's unwritten blocks cost nothing),
// and the device takes several at once. So the directories go level by
// level, deepest first, each level's side by side on a few threads; files
// and links go first, on the calling thread. Links are removed, never
// followed.
#pragma once

#include <string>

namespace cxxrun::agent {

// Removes `root` and everything under it, like std::filesystem::remove_all,
// with at most `threads` directory removals at once. Never throws; what
// cannot be removed stays. True once `root` is gone.
bool remove_tree(const std::string& root, int threads = 8);

}  // namespace cxxrun::agent
