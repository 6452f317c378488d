#include "agent/python/hook.h"

#include <set>

#include "agent/process/private_files.h"
#include "agent/python/sources.h"

namespace cxxrun::agent {

bool install_python_hook(const std::string& dir, std::string& why_not) {
  // Every worker executes these files: no other user may write them or
  // anything beside them. The __pycache__ directories are made here, 0700:
  // Python would make them with the workers' umask, and a .pyc planted in a
  // writable one runs as the worker. Parents before children (the set's order).
  std::set<std::string> dirs = {""};
  for (const EmbeddedFile& f : kPackageFiles) {
    const std::string path = f.path;
    for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
      dirs.insert("/" + path.substr(0, slash));
  }
  for (const std::string& sub : dirs)
    if (!ensure_private_dir(dir + sub, why_not) || !ensure_private_dir(dir + sub + "/__pycache__", why_not))
      return false;
  if (!write_private_file(dir + "/sitecustomize.py", kSitecustomizeSource, false, why_not)) return false;
  for (const EmbeddedFile& f : kPackageFiles)
    if (!write_private_file(dir + "/" + f.path, f.text, false, why_not)) return false;
  return true;
}

std::string python_path_with(const std::string& dir, const std::string& current) {
  return current.empty() ? dir : dir + ":" + current;
}

}  // namespace cxxrun::agent
