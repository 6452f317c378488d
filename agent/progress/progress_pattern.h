// --progress-pattern: which worker output lines are progress, and the step a
// line names. The one home of the pattern's syntax: the launcher checks a
// value with check_progress_pattern() before the job starts, the agent
// matches lines with ProgressPattern.
//
// The syntax is Perl's (Boost.Regex), which is what Python's `re` users
// write for everyday patterns: \d, \s, [...], (...), (?:...), +, *, ?. A line
// is progress when the pattern is found anywhere in it (a search, as
// Python's re.search). Boost's matcher keeps its backtracking on the heap
// and gives up on a pathological pattern instead of overflowing the stack,
// so no line can crash the agent: such a line is simply not progress.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

// Why `pattern` is not a usable regular expression, or nullopt when it is.
std::optional<std::string> check_progress_pattern(const std::string& pattern);

// The step a capture names: a decimal number (digits only) that fits in 64
// bits; anything else names none.
std::optional<uint64_t> step_of_capture(std::string_view capture);

class ProgressPattern {
 public:
  // Throws std::invalid_argument (check_progress_pattern's reason) when
  // `pattern` does not compile.
  explicit ProgressPattern(const std::string& pattern);
  ~ProgressPattern();
  ProgressPattern(const ProgressPattern&) = delete;
  ProgressPattern& operator=(const ProgressPattern&) = delete;

  struct Match {
    std::optional<uint64_t> step;  // the first capture group's, when it is a number
  };
  // Whether `line` (without its console prefix) is progress.
  std::optional<Match> match(std::string_view line) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> re_;
};

}  // namespace cxxrun::agent
