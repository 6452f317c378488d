// The launcher's view of the environment: every stage of the parse
// (launcher/options.h) reads it through this map, so tests pass their own
// instead of touching the real one.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace cxxrun::launcher {

using Env = std::map<std::string, std::string, std::less<>>;
// The process's own environment.
Env current_environment();

}  // namespace cxxrun::launcher
