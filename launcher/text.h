// The two text helpers every launcher parser shares: trim and split. A leaf
// (no launcher header below it), so launcher/hostfile.cc can use it without
// the include circle launcher/values.h would make (values -> raw_options ->
// parsed -> fanout_plan -> hostfile).
#pragma once

#include <string_view>
#include <vector>

namespace cxxrun::launcher {

// Without leading and trailing blanks (std::isspace: ' ', '\t', '\r', '\n', ...).
std::string_view trim(std::string_view s);
// Every field between `sep`s, empty ones kept: "a,,b" is {"a", "", "b"},
// "" is {""}. The views point into `s`.
std::vector<std::string_view> split(std::string_view s, char sep);

}  // namespace cxxrun::launcher
