#include "agent/forensics/library_file.h"

#include <cctype>

namespace cxxrun::agent {

bool python_library_file(std::string_view file) {
  if (file.starts_with("<frozen ")) return true;
  if (file.find("/site-packages/") != std::string_view::npos || file.find("/dist-packages/") != std::string_view::npos)
    return true;
  // The standard library: ".../lib/python3.11/threading.py".
  for (size_t at = file.find("/lib/python"); at != std::string_view::npos; at = file.find("/lib/python", at + 1)) {
    size_t i = at + 11;
    size_t digits = 0;
    while (i < file.size() && (std::isdigit(static_cast<unsigned char>(file[i])) || file[i] == '.')) ++i, ++digits;
    if (digits > 0 && i < file.size() && file[i] == '/') return true;
  }
  return false;
}

bool library_file(std::string_view file) {
  if (file.empty() || python_library_file(file)) return true;
  for (std::string_view dir : {"/usr/lib/", "/lib/x86_64-linux-gnu/", "/lib/aarch64-linux-gnu/", "/lib64/", "/usr/include/"})
    if (file.find(dir) != std::string_view::npos) return true;
  return false;
}

}  // namespace cxxrun::agent
