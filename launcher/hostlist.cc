#include "launcher/hostlist.h"

#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

namespace cxxrun::launcher {
namespace {

// Top-level commas only: those inside brackets separate ranges.
std::vector<std::string_view> entries(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (i > start) out.push_back(list.substr(start, i - start));
      start = i + 1;
    } else if (list[i] == '[') {
      if (++depth > 1) throw std::invalid_argument("nested '[' in host list");
    } else if (list[i] == ']') {
      if (--depth < 0) throw std::invalid_argument("']' without '[' in host list");
    }
  }
  if (depth != 0) throw std::invalid_argument("unclosed '[' in host list");
  return out;
}

unsigned long number(std::string_view digits, std::string_view range) {
  if (digits.empty() || digits.size() > 9)
    throw std::invalid_argument(fmt::format("'{}' is not a range of numbers", range));
  unsigned long n = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw std::invalid_argument(fmt::format("'{}' is not a range of numbers", range));
    n = n * 10 + static_cast<unsigned long>(c - '0');
  }
  return n;
}

// "001-004,010" -> {"001", "002", "003", "004", "010"}; the first bound's
// width is the padding.
std::vector<std::string> ranges(std::string_view body, size_t limit) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view range = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const unsigned long lo = number(lo_text, range);
    const unsigned long hi = dash == std::string_view::npos ? lo : number(range.substr(dash + 1), range);
    if (hi < lo) throw std::invalid_argument(fmt::format("range '{}' runs backwards", range));
    if (hi - lo >= limit || out.size() + (hi - lo) >= limit)
      throw std::invalid_argument(fmt::format("more than {} hosts", limit));
    for (unsigned long n = lo; n <= hi; ++n) out.push_back(fmt::format("{:0{}}", n, lo_text.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

void expand_entry(std::string_view entry, std::vector<std::string>& out, size_t limit) {
  std::vector<std::string> names{""};
  while (!entry.empty()) {
    const size_t open = entry.find('[');
    const std::string_view text = entry.substr(0, open);
    for (std::string& n : names) n += text;
    if (open == std::string_view::npos) break;
    const size_t close = entry.find(']', open);
    std::vector<std::string> grown;
    for (const std::string& n : names)
      for (const std::string& r : ranges(entry.substr(open + 1, close - open - 1), limit)) {
        if (grown.size() + out.size() >= limit) throw std::invalid_argument(fmt::format("more than {} hosts", limit));
        grown.push_back(n + r);
      }
    names = std::move(grown);
    entry.remove_prefix(close + 1);
  }
  for (std::string& n : names) {
    if (out.size() >= limit) throw std::invalid_argument(fmt::format("more than {} hosts", limit));
    out.push_back(std::move(n));
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, size_t limit) {
  std::vector<std::string> hosts;
  for (std::string_view entry : entries(list)) expand_entry(entry, hosts, limit);
  if (hosts.empty()) throw std::invalid_argument("empty host list");
  return hosts;
}

}  // namespace cxxrun::launcher
