// remove_tree (agent/process/tree_removal.h): the whole tree goes, its
// directories side by side, and a link in it is removed, never followed.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/process/tree_removal.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

TEST_CASE("remove_tree removes a run directory's whole tree, and never what a link in it points to") {
  const fs::path base = fs::temp_directory_path() / ("tree-removal-" + std::to_string(getpid()));
  fs::remove_all(base);
  const fs::path root = base / "torchelastic_x", outside = base / "outside";
  for (int r = 0; r < 8; ++r) fs::create_directories(root / "run" / "attempt_0" / std::to_string(r));
  fs::create_directories(root / "run" / "python" / "cxxrun" / "__pycache__");
  fs::create_directories(root / "run" / "heartbeat");
  fs::create_directories(outside);
  std::ofstream(root / "run" / "heartbeat" / "0") << "beat";
  std::ofstream(root / "run" / "attempt_0" / "3" / "error.json") << "{}";
  std::ofstream(outside / "kept") << "kept";
  fs::create_directory_symlink(outside, root / "run" / "attempt_0" / "link");
  fs::create_symlink(outside / "kept", root / "run" / "file-link");
  CHECK(remove_tree(root.string(), 3));
  CHECK_FALSE(fs::exists(fs::symlink_status(root)));
  CHECK(fs::exists(outside / "kept"));
  CHECK(remove_tree(root.string()));  // already gone: nothing to do
  CHECK(remove_tree(""));
  fs::remove_all(base);
}
