#include "launcher/abbreviations.h"

#include <string_view>

#include <fmt/format.h>

#include "launcher/errors.h"

namespace cxxrun::launcher {
namespace {

struct Match {
  const OptionSpec* spec = nullptr;
  std::string_view spelling;  // the one written out
};

Match exact(std::string_view name, std::span<const OptionSpec> table) {
  for (const OptionSpec& spec : table)
    for (std::string_view spelling : spellings_of(spec))
      if (spelling == name) return {&spec, spelling};
  return {};
}

// Per option, the first of its long spellings that starts with `prefix`: the
// one the user was writing ("--nproc_" -> "--nproc_per_node").
std::vector<Match> by_prefix(std::string_view prefix, std::span<const OptionSpec> table) {
  std::vector<Match> matches;
  for (const OptionSpec& spec : table)
    for (std::string_view spelling : spellings_of(spec))
      if (spelling.starts_with("--") && spelling.starts_with(prefix)) {
        matches.push_back({&spec, spelling});
        break;
      }
  return matches;
}

// The option `name` ("--nproc") names: by its whole name, else as a prefix of
// exactly one option's names; no option (spec nullptr) when it names none.
Match resolve(std::string_view name, std::span<const OptionSpec> table) {
  if (Match whole = exact(name, table); whole.spec != nullptr) return whole;
  std::vector<Match> matches = by_prefix(name, table);
  if (matches.size() == 1) return matches.front();
  if (matches.empty()) return {};
  std::string candidates;
  for (const Match& m : matches)
    candidates += (candidates.empty() ? "" : ", ") + std::string(m.spelling);
  throw UsageError(fmt::format("ambiguous option: {} could match {} (an abbreviation must match "
                               "one option only)",
                               name, candidates));
}

// "-mr 3", "-r3", "-r=3": short options may be bundled, and the first that
// takes a value takes the rest of the word, or the next word when it is last
// (CLI11 and argparse alike). Whether the next word is used up.
bool short_bundle_takes_next(std::string_view word, std::span<const OptionSpec> table) {
  for (std::size_t i = 1; i < word.size(); ++i) {
    const OptionSpec* spec = exact(std::string{'-', word[i]}, table).spec;
    if (spec == nullptr) return false;  // the parser names it
    if (spec->is_flag()) continue;
    return i + 1 == word.size() && spec->takes_separate_value();
  }
  return false;
}

}  // namespace

std::vector<std::string> expand_abbreviations(const std::vector<std::string>& args,
                                              std::span<const OptionSpec> table) {
  std::vector<std::string> out = args;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::string& word = out[i];
    // "--" ends the options; a word without a leading '-' (or "-" alone) is
    // the program. Either way the rest belongs to the program.
    if (word == "--" || word.size() < 2 || word.front() != '-') break;
    if (!word.starts_with("--")) {
      if (short_bundle_takes_next(word, table)) ++i;
      continue;
    }
    const std::size_t eq = word.find('=');
    const std::string_view name = std::string_view(word).substr(0, eq);
    if (name.size() <= 2) continue;  // "--=x": no name to complete
    const Match match = resolve(name, table);
    if (match.spec == nullptr) continue;  // unknown: the parser refuses it by name
    const bool separate_value = eq == std::string::npos && match.spec->takes_separate_value();
    out[i] = std::string(match.spelling) + (eq == std::string::npos ? "" : word.substr(eq));
    // CLI11 takes the next word as the value whatever it looks like
    // ("--role --x" is role "--x"), so it is never an option to complete.
    if (separate_value) ++i;
  }
  return out;
}

}  // namespace cxxrun::launcher
