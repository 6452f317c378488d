#include "launcher/hostfile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "launcher/errors.h"
#include "launcher/text.h"

namespace cxxrun::launcher {
namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

// The rule for a host: [user@]name, each of letters, digits, '.', '-', '_',
// neither starting with '-'. Anything else a shell splits or expands, or
// ssh reads as an option.
std::optional<std::string> bad_name(std::string_view login) {
  auto at = login.find('@');
  std::string_view user = at == std::string_view::npos ? std::string_view{} : login.substr(0, at);
  std::string_view name = at == std::string_view::npos ? login : login.substr(at + 1);
  if (at != std::string_view::npos && user.empty()) return "an empty user before '@'";
  if (name.empty()) return "no host name";
  for (std::string_view part : {user, name}) {
    if (part.starts_with('-')) return "a leading '-' (ssh would read an option)";
    for (char c : part)
      if (!name_char(c))
        return fmt::format("the character '{}' (a host is [user@]name of letters, digits, '.', '-' and '_')",
                           c == '\t' ? std::string("\\t") : std::string(1, c));
  }
  return std::nullopt;
}

int parse_slots(std::string_view text, const std::string& where) {
  const bool digits = !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string_view::npos;
  const int n = digits ? std::stoi(std::string(text)) : 0;
  if (n < 1 || n > kMaxSlots)
    throw UsageError(fmt::format("{}: slots '{}' must be a whole number from 1 to {}", where, text, kMaxSlots));
  return n;
}

Host make_host(std::string_view login, std::optional<int> slots, const std::string& where) {
  if (auto why = bad_name(login)) throw UsageError(fmt::format("{}: host '{}' has {}", where, login, *why));
  Host host{std::string(login), std::string(login.substr(login.find('@') + 1)), slots};
  return host;
}

// "host", "host:N", "host slots=N" (DeepSpeed; its other keys are refused,
// not ignored: a max_slots a user wrote means something to them).
Host parse_line(std::string_view line, const std::string& where) {
  std::vector<std::string> words;
  {
    std::istringstream in{std::string(line)};
    for (std::string w; in >> w;) words.push_back(w);
  }
  std::string_view first = words[0];
  std::optional<int> slots;
  auto colon = first.rfind(':');
  // The name first: a line that is a shell command is refused as one.
  if (auto why = bad_name(first.substr(0, colon)))
    throw UsageError(fmt::format("{}: host '{}' has {}", where, first.substr(0, colon), *why));
  if (colon != std::string_view::npos) {
    slots = parse_slots(first.substr(colon + 1), where);
    first = first.substr(0, colon);
  }
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (!w.starts_with("slots="))
      throw UsageError(fmt::format("{}: '{}' is not slots=N (a line is 'host', 'host slots=N' or 'host:N')", where, w));
    if (slots) throw UsageError(fmt::format("{}: the host's slots are given twice", where));
    slots = parse_slots(w.substr(6), where);
  }
  return make_host(first, slots, where);
}

void check_distinct(const std::vector<Host>& hosts, const std::vector<std::string>& wheres) {
  for (size_t i = 0; i < hosts.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (hosts[i].name == hosts[j].name)
        throw UsageError(fmt::format("{}: host '{}' is named again (first at {}); each host runs one agent, "
                                     "with all its workers",
                                     wheres[i], hosts[i].name, wheres[j]));
}

}  // namespace

std::vector<Host> parse_hostfile(std::string_view text, const std::string& origin) {
  std::vector<Host> hosts;
  std::vector<std::string> wheres;
  int number = 0;
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++number;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = fmt::format("{} line {}", origin, number);
    hosts.push_back(parse_line(line, where));
    wheres.push_back(where);
  }
  if (hosts.empty()) throw UsageError(origin + ": no hosts (the file holds only comments and blank lines)");
  check_distinct(hosts, wheres);
  return hosts;
}

std::vector<Host> parse_hosts_list(std::string_view text, const std::string& origin) {
  std::vector<Host> hosts;
  std::vector<std::string> wheres;
  if (trim(text).empty()) throw UsageError(origin + ": no hosts (give h1,h2,... or h1:N,...)");
  int number = 0;
  for (std::string_view item : split(text, ',')) {
    ++number;
    const std::string where = fmt::format("{} (host {})", origin, number);
    item = trim(item);
    if (item.empty()) throw UsageError(where + ": an empty host between commas");
    if (item.find_first_of(" \t") != std::string_view::npos)
      throw UsageError(fmt::format("{}: host '{}' holds a blank (a host is [user@]name[:slots])", where, item));
    hosts.push_back(parse_line(item, where));
    wheres.push_back(where);
  }
  check_distinct(hosts, wheres);
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path, const std::string& origin) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{}: cannot read it: {}", origin, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), origin);
}

}  // namespace cxxrun::launcher
