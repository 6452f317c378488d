#include "launcher/values.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace cxxrun::launcher {

namespace {

template <typename T>
bool parse_number(std::string_view s, T& out) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  if (negative) out = -out;
  return true;
}

UsageError bad_value(const RawValue& value, std::string_view rule) {
  return UsageError(fmt::format("{}: {}", value.shown(), rule));
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// 0 when `name` (with or without "SIG") is not a signal this system knows.
int signal_number(std::string_view name) {
  std::string bare = upper(name);
  if (bare.starts_with("SIG")) bare.erase(0, 3);
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && bare == abbrev) return sig;
  }
  return 0;
}

}  // namespace

std::optional<long long> integer_of(std::string_view text) {
  long long out = 0;
  if (!parse_number(text, out)) return std::nullopt;
  return out;
}

std::optional<double> number_of(std::string_view text) {
  double out = 0;
  if (!parse_number(text, out) || !std::isfinite(out)) return std::nullopt;
  return out;
}

int signal_of(std::string_view text) {
  std::string_view s = trim(text);
  bool digits = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  if (!digits) return signal_number(s);
  int sig = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), sig);
  bool ok = ec == std::errc() && end == s.data() + s.size() && sig >= 1 && sig <= SIGRTMAX;
  return ok ? sig : 0;
}

int parse_int(const RawValue& value) {
  int out = 0;
  if (!parse_number(value.text, out)) throw bad_value(value, "not an integer");
  return out;
}

double parse_float(const RawValue& value) {
  double out = 0;
  if (!parse_number(value.text, out) || !std::isfinite(out)) throw bad_value(value, "not a number");
  return out;
}

std::pair<int, int> parse_nnodes(const RawValue& value) {
  auto parts = split(value.text, ':');
  int lo = 0, hi = 0;
  bool ok = parts.size() <= 2 && parse_number(parts.front(), lo) && parse_number(parts.back(), hi);
  if (!ok) throw bad_value(value, "not in \"N\" or \"MIN:MAX\" format");
  if (!(0 < lo && lo <= hi)) throw bad_value(value, "node counts must satisfy 0 < MIN <= MAX");
  return {lo, hi};
}

int parse_max_restarts(const RawValue& value) {
  int n = 0;
  if (!parse_number(value.text, n) || n < 0) throw bad_value(value, "must be an integer >= 0");
  return n;
}

int parse_port(const RawValue& value) {
  int port = 0;
  if (!parse_number(value.text, port) || port < 1 || port > 65535)
    throw bad_value(value, "must be a port number in 1..65535");
  return port;
}

double parse_positive_seconds(const RawValue& value) {
  double seconds = 0;
  if (!parse_number(value.text, seconds) || !std::isfinite(seconds) || seconds <= 0)
    throw bad_value(value, "must be a number of seconds > 0");
  return seconds;
}

agent::StdSpec parse_std_spec(const RawValue& value) {
  auto std_of = [](char c) { return static_cast<agent::Std>(c - '0'); };
  auto is_std = [](char c) { return c >= '0' && c <= '3'; };
  const std::string& s = value.text;
  agent::StdSpec spec;
  if (s.size() == 1 && is_std(s[0])) {
    spec.all = std_of(s[0]);
    return spec;
  }
  for (std::string_view item : split(s, ',')) {
    // Local ranks are one digit, as in torch's regex: ranks >= 10 cannot be named.
    bool ok = item.size() == 3 && std::isdigit(static_cast<unsigned char>(item[0])) &&
              item[1] == ':' && is_std(item[2]);
    if (!ok) throw bad_value(value, R"(does not match <^[0123]$> or <^(\d:[0123],)*(\d:[0123])$>)");
    spec.per_rank[item[0] - '0'] = std_of(item[2]);
  }
  spec.per_rank_given = true;
  return spec;
}

std::set<int> parse_local_ranks_filter(const RawValue& value) {
  std::set<int> ranks;
  if (value.text.empty()) return ranks;
  for (std::string_view item : split(value.text, ',')) {
    int rank = 0;
    if (!parse_number(item, rank))
      throw bad_value(value,
                "--local_ranks_filter must be a comma-separated list of integers e.g. "
                "--local_ranks_filter=0,1,2");
    if (rank < 0) throw bad_value(value, "local ranks cannot be negative");
    ranks.insert(rank);
  }
  return ranks;
}

std::map<std::string, std::string> parse_rdzv_conf(const RawValue& value) {
  std::map<std::string, std::string> conf;
  if (trim(value.text).empty()) return conf;
  for (std::string_view item : split(trim(value.text), ',')) {
    auto eq = item.find('=');
    std::string_view key = trim(item.substr(0, eq));
    if (key.empty())
      throw bad_value(
          value,
          "the rendezvous configuration must be in format <key1>=<value1>,...,<keyN>=<valueN>");
    std::string_view val = eq == std::string_view::npos ? "" : trim(item.substr(eq + 1));
    if (val.empty())
      throw bad_value(value,
                fmt::format("the rendezvous configuration option '{}' must have a value", key));
    conf[std::string(key)] = std::string(val);
  }
  return conf;
}

std::vector<int> parse_signals(const RawValue& value) {
  std::vector<int> signals;
  for (std::string_view item : split(value.text, ',')) {
    std::string_view name = trim(item);
    int sig = signal_number(name);
    if (sig == 0) throw bad_value(value, fmt::format("'{}' is not a signal name", name));
    if (sig == SIGKILL || sig == SIGSTOP)
      throw bad_value(value, fmt::format("{} cannot be caught, so it cannot be handled", upper(name)));
    // The agent watches its workers through SIGCHLD; forwarding it makes no sense.
    if (sig == SIGCHLD) throw bad_value(value, "SIGCHLD cannot be forwarded: the agent needs it");
    if (std::find(signals.begin(), signals.end(), sig) == signals.end()) signals.push_back(sig);
  }
  return signals;
}

std::string parse_log_level(const RawValue& value) {
  // Every name Python's logging knows, so that any LOGLEVEL torchrun accepts
  // works here too. NOTSET makes torch's logger defer to its parent, i.e. the
  // default: cxxrun's is INFO.
  static const std::vector<std::pair<std::string_view, std::string_view>> levels = {
      {"DEBUG", "DEBUG"}, {"INFO", "INFO"},         {"WARNING", "WARNING"}, {"WARN", "WARNING"},
      {"ERROR", "ERROR"}, {"CRITICAL", "CRITICAL"}, {"FATAL", "CRITICAL"},  {"NOTSET", "INFO"}};
  for (auto [name, level] : levels)
    if (value.text == name) return std::string(level);
  for (auto [name, level] : levels)
    if (upper(value.text) == name)
      throw bad_value(value, fmt::format("not a log level; names are upper case, as in Python's "
                                   "logging: LOGLEVEL={}",
                                   name));
  throw bad_value(value, "not a log level (DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL, FATAL or NOTSET)");
}

void check_choice(const RawValue& value, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value.text) != choices.end()) return;
  throw bad_value(value, fmt::format("invalid choice (choose from {})", fmt::join(choices, ", ")));
}

}  // namespace cxxrun::launcher
