// The Python cxxrun runs, built into the binary: the files of agent/python/,
// read by CMake at configure time (agent/CMakeLists.txt, which re-runs when
// one changes), so nothing is installed or found at run time and no Python
// is written in a C++ string literal.
#pragma once

namespace cxxrun::agent {

// agent/python/zygote.py: the forkserver's interpreter (agent/zygote.h).
extern const char* const kZygoteSource;
// agent/python/sitecustomize.py and agent/python/cxxrun/__init__.py: the hook
// every worker's Python reads (agent/python_hook.h).
extern const char* const kSitecustomizeSource;
extern const char* const kPackageSource;

}  // namespace cxxrun::agent
