// The Python cxxrun runs, built into the binary: the files of agent/python/,
// read by CMake at configure time (agent/python/CMakeLists.txt, which re-runs when
// one changes), so nothing is installed or found at run time and no Python
// is written in a C++ string literal.
#pragma once

#include <span>

namespace cxxrun::agent {

// agent/python/zygote.py: the forkserver's interpreter (agent/warm/zygote.h).
extern const char* const kZygoteSource;
// agent/python/zygote_sitecustomize.py: the zygote's own sitecustomize.
extern const char* const kZygoteSitecustomizeSource;
// agent/python/sitecustomize.py: the hook every worker's Python reads
// (agent/python/hook.h).
extern const char* const kSitecustomizeSource;

struct EmbeddedFile {
  const char* path;  // under agent/python/, e.g. "cxxrun/__init__.py"
  const char* text;
};
// The cxxrun package beside it: every .py file of agent/python/cxxrun/ and
// its py.typed, whatever files there are (CMake finds them), sorted by path.
extern const std::span<const EmbeddedFile> kPackageFiles;

}  // namespace cxxrun::agent
