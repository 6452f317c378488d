// The Python cxxrun runs is the files of agent/python/, byte for byte: what
// the binary embeds (agent/python/sources.h) and what install_python_hook
// writes equal the files in the source tree, so an edit to one is an edit to
// what runs (a stale or hand-copied text would show here).
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace

TEST_CASE("the embedded Python is the files of agent/python/", "[python_sources]") {
  const std::string source = CXXRUN_PYTHON_DIR;
  CHECK(kZygoteSource == read_whole(source + "/zygote.py"));
  CHECK(kZygoteSitecustomizeSource == read_whole(source + "/zygote_sitecustomize.py"));
  CHECK(kSitecustomizeSource == read_whole(source + "/sitecustomize.py"));
  CHECK(kPackageSource == read_whole(source + "/cxxrun/__init__.py"));
}

TEST_CASE("the hook writes the files of agent/python/ as they are", "[python_sources]") {
  TempDir tmp;
  std::string why_not;
  REQUIRE(install_python_hook(tmp.path + "/python", why_not));
  const std::string source = CXXRUN_PYTHON_DIR;
  for (const char* file : {"/sitecustomize.py", "/cxxrun/__init__.py"})
    CHECK(read_whole(tmp.path + "/python" + file) == read_whole(source + file));
}
