#include "agent/process/proc_cgroup.h"

namespace cxxrun::agent {

using std::string_view;

bool lists(string_view list, string_view item) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    if (list.substr(0, comma) == item) return true;
    if (comma == string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

std::optional<std::string> cgroup_path(string_view proc_cgroup, string_view controller) {
  while (!proc_cgroup.empty()) {
    const std::size_t nl = proc_cgroup.find('\n');
    const string_view line = proc_cgroup.substr(0, nl);
    proc_cgroup.remove_prefix(nl == string_view::npos ? proc_cgroup.size() : nl + 1);
    const std::size_t first = line.find(':');
    const std::size_t second = first == string_view::npos ? first : line.find(':', first + 1);
    if (second == string_view::npos) continue;
    const string_view id = line.substr(0, first);
    const string_view controllers = line.substr(first + 1, second - first - 1);
    const bool match = controller.empty() ? id == "0" && controllers.empty() : lists(controllers, controller);
    if (match) return std::string(line.substr(second + 1));
  }
  return std::nullopt;
}

}  // namespace cxxrun::agent
