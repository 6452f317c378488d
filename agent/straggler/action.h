// --straggler-action's words (docs/stragglers.md): report (the default),
// replace, off. The launcher reads them, the agent acts on
// Config::straggler_action.
#pragma once

#include <optional>
#include <string_view>

#include "agent/config.h"

namespace cxxrun::agent {

inline std::optional<StragglerAction> parse_straggler_action(std::string_view text) {
  if (text == "report") return StragglerAction::report;
  if (text == "replace") return StragglerAction::replace;
  if (text == "off") return StragglerAction::off;
  return std::nullopt;
}

inline std::string_view straggler_action_name(StragglerAction a) {
  switch (a) {
    case StragglerAction::report: return "report";
    case StragglerAction::replace: return "replace";
    case StragglerAction::off: break;
  }
  return "off";
}

}  // namespace cxxrun::agent
