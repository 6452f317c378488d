#include "launcher/start_method.h"

#include <cctype>

#include <fmt/format.h>

#include "launcher/values.h"

namespace cxxrun::launcher {
namespace {

bool identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// "torch,torch.distributed": dotted module names, as `import` takes them.
std::vector<std::string> modules(const RawValue& value) {
  std::vector<std::string> out;
  if (trim(value.text).empty()) return out;  // preload nothing
  for (std::string_view item : split(value.text, ',')) {
    const std::string_view name = trim(item);
    bool ok = !name.empty();
    for (std::string_view part : split(name, '.')) ok = ok && identifier(part);
    if (!ok)
      throw UsageError(fmt::format("{}: '{}' is not a module name (MOD[,MOD...], each like torch or "
                                   "torch.distributed; empty: nothing)",
                                   value.shown(), name));
    out.emplace_back(name);
  }
  return out;
}

}  // namespace

void apply_start_method(const RawOptions& raw, const Program& program, agent::Config& c,
                        std::vector<std::string>& warnings) {
  const RawValue& method = raw.at("start_method");
  const RawValue* preload = raw.find("preload");
  const std::vector<std::string> preloaded = modules(preload ? *preload : RawValue{kDefaultPreload, "--preload"});
  // No --start-method (nor PET_START_METHOD): warm restarts for a Python
  // program without slowing its first launch (agent/warm/forkserver.h).
  const bool chosen = raw.given.count("start_method") > 0;
  if (chosen && method.text != "forkserver") {
    if (preload) warnings.push_back(preload->shown() + " has no effect without --start-method=forkserver");
    return;
  }
  if (!program.python) {
    if (chosen)
      warnings.push_back(fmt::format("{}: {} is not a Python program, so its workers start by exec", method.shown(),
                                     program.entrypoint_name));
    else if (preload)
      warnings.push_back(fmt::format("{} has no effect: {} is not a Python program", preload->shown(),
                                     program.entrypoint_name));
    return;
  }
  c.forkserver = {program.command.front(), preloaded, preload != nullptr, !chosen, program.script};
}

}  // namespace cxxrun::launcher
