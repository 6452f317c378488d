#include "agent/progress/progress_pattern.h"

#include <charconv>
#include <stdexcept>

#include <boost/regex.hpp>

namespace cxxrun::agent {

struct ProgressPattern::Compiled {
  boost::regex re;
};

std::optional<std::string> check_progress_pattern(const std::string& pattern) {
  if (pattern.empty()) return "needs a regular expression (e.g. 'step (\\d+)')";
  try {
    boost::regex re(pattern, boost::regex::perl);
  } catch (const boost::regex_error& e) {
    // The error's own words and where, not what(): that quotes the pattern
    // back with markers, which the line already shows.
    std::string why = boost::regex_traits<char>().error_string(e.code());
    while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
    return "is not a valid regular expression (Perl syntax, as Python's re): " + why + " at offset " +
           std::to_string(e.position());
  }
  return std::nullopt;
}

std::optional<uint64_t> step_of_capture(std::string_view capture) {
  if (capture.empty()) return std::nullopt;
  for (char c : capture)
    if (c < '0' || c > '9') return std::nullopt;
  uint64_t step = 0;
  const auto [end, ec] = std::from_chars(capture.data(), capture.data() + capture.size(), step);
  if (ec != std::errc() || end != capture.data() + capture.size()) return std::nullopt;  // past 64 bits
  return step;
}

ProgressPattern::ProgressPattern(const std::string& pattern) {
  if (auto why = check_progress_pattern(pattern)) throw std::invalid_argument(*why);
  re_ = std::make_unique<Compiled>(Compiled{boost::regex(pattern, boost::regex::perl)});
}

ProgressPattern::~ProgressPattern() = default;

std::optional<ProgressPattern::Match> ProgressPattern::match(std::string_view line) const {
  boost::match_results<std::string_view::const_iterator> m;
  try {
    if (!boost::regex_search(line.begin(), line.end(), m, re_->re)) return std::nullopt;
  } catch (const std::runtime_error&) {
    return std::nullopt;  // Boost gave up on the match (too complex): not progress
  }
  Match found;
  if (m.size() > 1 && m[1].matched) found.step = step_of_capture(line.substr(m[1].first - line.begin(), m[1].length()));
  return found;
}

}  // namespace cxxrun::agent
