// One row per launcher option: the CLI11 registration (options.cc) and the
// --help text (help.cc) are both generated from it, so they cannot drift.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::launcher {

enum class Group { general, workers, rendezvous, launch, logging, static_rdzv, extensions, hosts };

enum class EnvFallback {
  none,   // plain argparse option in torchrun
  value,  // action=env: PET_<DEST> replaces the default
  flag,   // action=check_env: PET_<DEST> is "0" or "1"
};

struct OptionSpec {
  std::string_view names;     // CLI11 list, every spelling: "--nproc-per-node,--nproc_per_node"
  std::string_view metavar;   // empty for a flag
  const char* default_value;  // nullptr: none (torch's None)
  EnvFallback env;
  Group group;
  std::string_view help;
  // Given several times, every value counts (RawOptions::lists); PET_<DEST>,
  // if read, is one comma-separated list. Otherwise the last one wins.
  bool repeatable = false;
  // An option whose value is optional: given alone it has this value, and a
  // value comes only after '=', never in the next word, so "--opt train.py"
  // keeps train.py as the program.
  const char* bare_value = nullptr;

  bool is_flag() const { return metavar.empty(); }
  // "--opt VALUE" as well as "--opt=VALUE".
  bool takes_separate_value() const { return !is_flag() && bare_value == nullptr; }
};

std::span<const OptionSpec> option_table();

// Every spelling in spec.names, in order: {"-r", "--redirects"}.
std::vector<std::string_view> spellings_of(const OptionSpec& spec);

// argparse's dest: the first long spelling, dashes -> underscores.
std::string dest_of(const OptionSpec& spec);
// "PET_" + upper(dest).
std::string env_name_of(const OptionSpec& spec);
// "--nproc-per-node": the spelling used in messages.
std::string main_name_of(const OptionSpec& spec);
std::string_view group_title(Group group);

}  // namespace cxxrun::launcher
