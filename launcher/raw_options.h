// The command line after option syntax is handled but before any value is
// interpreted: every option as text, remembering where it came from so errors
// can name "--nnodes=2:1" or "PET_NNODES=2:1".
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/environment.h"
#include "launcher/parsed.h"

namespace cxxrun::launcher {

struct RawValue {
  std::string text;
  std::string origin;  // "--nnodes" (command line or default) or "PET_NNODES"

  std::string shown() const { return origin + "=" + text; }
};

struct RawOptions {
  // By dest ("nproc_per_node"). Absent: not given and no default.
  std::map<std::string, RawValue, std::less<>> values;
  std::set<std::string, std::less<>> flags;  // dests of flags that are on
  // Repeatable options, by dest: every command-line value in order, or the
  // one PET_<DEST> value. Absent: neither given.
  std::map<std::string, std::vector<RawValue>, std::less<>> lists;
  // Dests the user set, on the command line or by PET_<DEST>: not defaults,
  // nor what the launcher derived (launcher/slurm.h).
  std::set<std::string, std::less<>> given;
  bool has_program = false;
  std::string program;
  std::vector<std::string> program_args;

  const RawValue* find(std::string_view dest) const {
    auto it = values.find(dest);
    return it == values.end() ? nullptr : &it->second;
  }
  // For options that always have a value (a default at least).
  const RawValue& at(std::string_view dest) const {
    if (const RawValue* v = find(dest)) return *v;
    throw std::logic_error("option " + std::string(dest) + " has no value and no default");
  }
  bool flag(std::string_view dest) const { return flags.count(dest) != 0; }
  bool was_given(std::string_view dest) const { return given.count(dest) != 0; }
  const std::vector<RawValue>& list(std::string_view dest) const {
    static const std::vector<RawValue> none;
    auto it = lists.find(dest);
    return it == lists.end() ? none : it->second;
  }
};

// Interprets and validates `raw` into a Config (build_config.cc).
Parsed build_config(const RawOptions& raw, const Env& env);

}  // namespace cxxrun::launcher
