// This machine's name as the summary, the event log and console prefixes
// show it: gethostname(), never a DNS lookup, read once.
#pragma once

#include <string>

namespace cxxrun::agent {

const std::string& this_hostname();

}  // namespace cxxrun::agent
