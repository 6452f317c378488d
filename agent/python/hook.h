// What cxxrun adds to every Python process a job starts, with no change to
// the user's code: a `sitecustomize` module, first on PYTHONPATH, that
// registers Python's faulthandler (all threads) for cxxrun's stack signal
// (agent/hang/stack_dump.h) when the worker's environment names a stack file,
// then runs the `sitecustomize` it shadows (Debian's, a virtualenv's, the
// user's), so nothing of theirs is lost, and leaves it as what `import
// sitecustomize` gives. Beside it, the `cxxrun` package:
// `import cxxrun; cxxrun.heartbeat(); cxxrun.step(n); with cxxrun.section("step", 600):`,
// the heartbeat page (common/heartbeat_layout.h) for the main thread. A process that already handles the
// signal keeps its handler. Python started with -S, -I or -E does not read
// it (docs/hangs.md). The Python is agent/python/sitecustomize.py and every
// file of agent/python/cxxrun/, built in (agent/python/sources.h).
#pragma once

#include <string>

namespace cxxrun::agent {

// Writes the hook into `dir` (made if need be): sitecustomize.py and the
// package's every file under cxxrun/ (kPackageFiles), 0700 directories and 0600
// files whatever the umask, never through a link (agent/process/private_files.h):
// every worker executes it. False, with the reason in `why_not`, when it
// cannot.
bool install_python_hook(const std::string& dir, std::string& why_not);

// `dir` put first on a PYTHONPATH whose value was `current` ("" or unset:
// none).
std::string python_path_with(const std::string& dir, const std::string& current);

}  // namespace cxxrun::agent
