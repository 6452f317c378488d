#include "launcher/environment.h"

#include <string_view>

extern char** environ;

namespace cxxrun::launcher {

Env current_environment() {
  Env env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv = *entry;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

}  // namespace cxxrun::launcher
