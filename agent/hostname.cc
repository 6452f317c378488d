#include "agent/hostname.h"

#include <unistd.h>

namespace cxxrun::agent {

const std::string& this_hostname() {
  static const std::string name = [] {
    char buf[256] = {};
    return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("localhost");
  }();
  return name;
}

}  // namespace cxxrun::agent
