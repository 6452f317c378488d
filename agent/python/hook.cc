#include "agent/python/hook.h"

#include "agent/process/private_files.h"
#include "agent/python/sources.h"

namespace cxxrun::agent {

bool install_python_hook(const std::string& dir, std::string& why_not) {
  // Every worker executes these files: no other user may write them or
  // anything beside them. The __pycache__ directories are made here, 0700:
  // Python would make them with the workers' umask, and a .pyc planted in a
  // writable one runs as the worker.
  for (const char* sub : {"", "/__pycache__", "/cxxrun", "/cxxrun/__pycache__"})
    if (!ensure_private_dir(dir + sub, why_not)) return false;
  for (const auto& [file, text] : {std::pair{"/sitecustomize.py", kSitecustomizeSource}, {"/cxxrun/__init__.py", kPackageSource}})
    if (!write_private_file(dir + file, text, false, why_not)) return false;
  return true;
}

std::string python_path_with(const std::string& dir, const std::string& current) {
  return current.empty() ? dir : dir + ":" + current;
}

}  // namespace cxxrun::agent
