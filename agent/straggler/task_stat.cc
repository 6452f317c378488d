#include "agent/straggler/task_stat.h"

#include <charconv>
#include <string>

#include "agent/straggler/small_file.h"

namespace cxxrun::agent {
namespace {

// The next space-separated field of `text`, consumed.
std::string_view next_field(std::string_view& text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  const std::size_t end = text.find_first_of(" \n");
  const std::string_view field = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end);
  return field;
}

bool parse_number(std::string_view field, unsigned long long& out) {
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  return !field.empty() && ec == std::errc() && end == field.data() + field.size();
}

std::string proc_file(pid_t pid, const char* name) {
  return "/proc/" + std::to_string(pid) + "/" + name;
}

}  // namespace

std::optional<TaskStat> parse_task_stat(std::string_view text) {
  // "1234 (a (weird) name) S 1 1234 ...": field 3 follows the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos || text.find('(') > close) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  TaskStat s;
  const std::string_view state = next_field(rest);  // field 3
  if (state.size() != 1) return std::nullopt;
  s.state = state.front();
  unsigned long long utime = 0, stime = 0;
  // Fields 4..22; we want 14 (utime), 15 (stime) and 22 (starttime).
  for (int field = 4; field <= 22; ++field) {
    const std::string_view f = next_field(rest);
    if (f.empty()) return std::nullopt;
    unsigned long long value = 0;
    if (field == 14 || field == 15 || field == 22) {
      if (!parse_number(f, value)) return std::nullopt;
      (field == 14 ? utime : field == 15 ? stime : s.start_ticks) = value;
    }
  }
  s.cpu_ticks = utime + stime;
  return s;
}

std::optional<SchedStat> parse_schedstat(std::string_view text) {
  SchedStat s;
  if (!parse_number(next_field(text), s.run_ns) || !parse_number(next_field(text), s.run_delay_ns)) return std::nullopt;
  return s;
}

std::optional<TaskStat> read_task_stat(pid_t pid) {
  // The line is a few hundred bytes; a command name is at most 64.
  const auto text = read_small_file(proc_file(pid, "stat"), 1024);
  return text ? parse_task_stat(*text) : std::nullopt;
}

std::optional<SchedStat> read_schedstat(pid_t pid) {
  const auto text = read_small_file(proc_file(pid, "schedstat"), 128);
  return text ? parse_schedstat(*text) : std::nullopt;
}

std::string read_wchan(pid_t pid) {
  const auto text = read_small_file(proc_file(pid, "wchan"), 128);
  if (!text || text->empty() || *text == "0") return "";
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

}  // namespace cxxrun::agent
