// The Python cxxrun runs is the files of agent/python/, byte for byte: what
// the binary embeds (agent/python/sources.h) and what install_python_hook
// writes equal the files in the source tree, so an edit to one is an edit to
// what runs (a stale or hand-copied text would show here).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/python/hook.h"
#include "agent/python/sources.h"
#include "temp_tree.h"

using namespace cxxrun::agent;

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What Python reads of the package in the source tree: every .py file of
// agent/python/cxxrun/ and its py.typed, by path under agent/python/, sorted.
std::vector<std::string> package_files_in_the_tree() {
  namespace fs = std::filesystem;
  const fs::path root = CXXRUN_PYTHON_DIR;
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root / "cxxrun")) {
    const fs::path rel = entry.path().lexically_relative(root);
    if (!entry.is_regular_file() || rel.string().find("__pycache__") != std::string::npos) continue;
    if (rel.extension() == ".py" || rel.filename() == "py.typed") files.push_back(rel.string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("the embedded Python is the files of agent/python/", "[python_sources]") {
  const std::string source = CXXRUN_PYTHON_DIR;
  CHECK(kZygoteSource == read_whole(source + "/zygote.py"));
  CHECK(kZygoteSitecustomizeSource == read_whole(source + "/zygote_sitecustomize.py"));
  CHECK(kSitecustomizeSource == read_whole(source + "/sitecustomize.py"));
}

TEST_CASE("the embedded package is every file of agent/python/cxxrun/", "[python_sources]") {
  // A file added to the package (a submodule, __main__.py) is embedded with
  // no change to the build: none is missing, none is stale.
  const std::vector<std::string> tree = package_files_in_the_tree();
  REQUIRE(std::count(tree.begin(), tree.end(), "cxxrun/__init__.py") == 1);
  REQUIRE(std::count(tree.begin(), tree.end(), "cxxrun/py.typed") == 1);
  std::vector<std::string> embedded;
  for (const EmbeddedFile& f : kPackageFiles) embedded.push_back(f.path);
  CHECK(embedded == tree);
  for (const EmbeddedFile& f : kPackageFiles) {
    INFO(f.path);
    CHECK(f.text == read_whole(std::string(CXXRUN_PYTHON_DIR) + "/" + f.path));
  }
}

TEST_CASE("the hook writes the files of agent/python/ as they are", "[python_sources]") {
  TempDir tmp;
  std::string why_not;
  REQUIRE(install_python_hook(tmp.path + "/python", why_not));
  const std::string source = CXXRUN_PYTHON_DIR;
  std::vector<std::string> files = package_files_in_the_tree();
  files.push_back("sitecustomize.py");
  for (const std::string& file : files) {
    INFO(file);
    CHECK(read_whole(tmp.path + "/python/" + file) == read_whole(source + "/" + file));
  }
}
