#include "launcher/extensions.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "agent/progress/progress_pattern.h"
#include "agent/straggler/action.h"
#include "agent/verdict/judge.h"
#include "launcher/values.h"
#include "net/endpoint.h"

namespace cxxrun::launcher {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

constexpr double kMaxSeconds = 1e9;
// Least exposure: /healthz names the job, its workers' pids and states, so
// only this machine may read it unless --health-host says otherwise.
constexpr const char* kDefaultHealthHost = "127.0.0.1";
constexpr std::size_t kMaxSectionName = 31;

UsageError bad(const RawValue& value, const std::string& rule) {
  return UsageError(fmt::format("{}: {}", value.shown(), rule));
}

std::optional<RawValue> from_env(const Env& env, std::string_view name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return RawValue{it->second, it->first};
}

// --health-port, else PET_HEALTH_PORT, else torch's TORCHELASTIC_HEALTH_CHECK_PORT.
std::optional<RawValue> health_port_value(const RawOptions& raw, const Env& env) {
  if (const RawValue* v = raw.find("health_port")) return *v;
  return from_env(env, "TORCHELASTIC_HEALTH_CHECK_PORT");
}

// Rounded up to whole milliseconds, so a positive time never becomes 0 (off).
milliseconds to_ms(double seconds) {
  if (seconds <= 0) return milliseconds(0);
  return milliseconds(std::max<long long>(1, std::llround(std::ceil(seconds * 1000))));
}

std::string event_log(const RawValue& value) {
  if (value.text.empty()) throw bad(value, "needs a file name");
  fs::path path(value.text);
  fs::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw bad(value, fmt::format("directory {} does not exist", parent.string()));
  if (fs::is_directory(path, ec)) throw bad(value, "is a directory, not a file");
  return value.text;
}

int health_port(const RawValue& value) {
  auto port = integer_of(value.text);
  if (!port || *port < 0 || *port > 65535)
    throw bad(value, "must be a port number in 0..65535 (0: any free port)");
  return static_cast<int>(*port);
}

// What the health server can bind without a resolver: an IP address (IPv6
// optionally in brackets, as --master-addr takes it), "localhost", or "" for
// every interface.
std::string health_host(const RawValue& value) {
  std::string host(trim(value.text));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "localhost") return host;
  unsigned char buffer[sizeof(in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
      inet_pton(AF_INET6, host.c_str(), buffer) == 1)
    return host;
  throw bad(value, "must be an IP address or localhost (empty: every interface)");
}

milliseconds heartbeat_timeout(const RawValue& value) {
  auto seconds = number_of(value.text);
  if (!seconds || *seconds < 0 || *seconds > kMaxSeconds)
    throw bad(value, "must be a number of seconds > 0 (at most 1e9), or 0 for off");
  return to_ms(*seconds);
}

// The pattern's one check (agent/progress/progress_pattern.h), before any
// worker runs.
std::string progress_pattern(const RawValue& value) {
  if (auto why = agent::check_progress_pattern(value.text)) throw bad(value, *why);
  return value.text;
}

// Absolute, so a worker that changes directory does not move it; it need
// not exist yet (the job may make it), but what is there must be one.
std::string checkpoint_dir(const RawValue& value) {
  if (trim(value.text).empty()) throw bad(value, "needs a directory");
  std::error_code ec;
  const fs::path path = fs::absolute(value.text, ec);
  if (ec) throw bad(value, ec.message());
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) throw bad(value, "exists and is not a directory");
  return path.lexically_normal().string();
}

milliseconds kill_timeout(const RawValue& value) {
  auto seconds = number_of(value.text);
  if (!seconds || *seconds <= 0 || *seconds > kMaxSeconds)
    throw bad(value, "must be a number of seconds > 0 (at most 1e9)");
  return std::max(milliseconds(1), to_ms(*seconds));
}

bool section_name_ok(std::string_view name) {
  if (name.empty() || name.size() > kMaxSectionName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

// Every value is "NAME=SECONDS[,NAME=SECONDS...]"; a later NAME wins.
void section_timeouts(const std::vector<RawValue>& values,
                      std::map<std::string, milliseconds>& out) {
  for (const RawValue& value : values) {
    bool from_env = value.origin.starts_with("PET_");
    if (from_env && trim(value.text).empty()) continue;
    for (std::string_view item : split(value.text, ',')) {
      auto eq = item.find('=');
      if (eq == std::string_view::npos)
        throw bad(value, fmt::format("'{}' is not NAME=SECONDS", trim(item)));
      std::string_view name = trim(item.substr(0, eq));
      if (!section_name_ok(name))
        throw bad(value, fmt::format("section name '{}' must be 1..{} characters of "
                                     "A-Z a-z 0-9 _ . -",
                                     name, kMaxSectionName));
      auto seconds = number_of(item.substr(eq + 1));
      if (!seconds || *seconds <= 0 || *seconds > kMaxSeconds)
        throw bad(value, fmt::format("section '{}' needs a number of seconds > 0 (at most 1e9), "
                                     "not '{}'",
                                     name, trim(item.substr(eq + 1))));
      out[std::string(name)] = to_ms(*seconds);
    }
  }
}

int stack_dump_signal(const RawValue& value) {
  if (trim(value.text) == "0") return 0;  // none, as when not given
  int sig = signal_of(value.text);
  if (sig == 0) throw bad(value, "not a signal name or number (e.g. SIGUSR1, USR1 or 10; 0: none)");
  if (sig == SIGKILL || sig == SIGSTOP)
    throw bad(value, "SIGKILL and SIGSTOP cannot be caught, so a worker cannot dump its stacks");
  return sig;
}

// torchrun's agent reads these two; "1" turns the watchdog on.
void file_timer(const Env& env, agent::Config& c) {
  if (auto enabled = from_env(env, "TORCHELASTIC_ENABLE_FILE_TIMER")) {
    if (enabled->text == "1")
      c.file_timer = true;
    else if (enabled->text != "0")
      throw bad(*enabled, "must be 1 (file-timer watchdog on) or 0 (off)");
  }
  if (auto path = from_env(env, "TORCHELASTIC_TIMER_FILE")) c.file_timer_path = path->text;
}

// cxxrun's own: "subreaper" keeps the job's processes out of a cgroup even
// where one could be made (a site that manages cgroups itself; tests).
void containment(const Env& env, agent::Config& c) {
  auto value = from_env(env, "CXXRUN_CONTAINMENT");
  if (!value || value->text == "auto") return;
  if (value->text != "subreaper") throw bad(*value, "must be auto (a cgroup where possible) or subreaper");
  c.use_cgroup = false;
}

// --tty, else CXXRUN_TTY (cxxrun's own: a PET_ name would suggest torchrun
// reads it).
void tty(const RawOptions& raw, const Env& env, agent::Config& c) {
  std::optional<RawValue> value;
  if (const RawValue* v = raw.find("tty"))
    value = *v;
  else
    value = from_env(env, "CXXRUN_TTY");
  if (!value) return;
  check_choice(*value, {"auto", "always", "never"});
  c.tty = value->text == "always" ? agent::Tty::always
          : value->text == "never" ? agent::Tty::never
                                   : agent::Tty::auto_;
}

// "50G", "1.5T", "1048576": bytes, K/M/G/T as powers of 1024 (df's).
std::optional<unsigned long long> byte_count(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  double unit = 1;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (const auto* p = std::strchr("KMGT", last); p != nullptr && last != '\0') {
    unit = std::pow(1024.0, static_cast<double>(p - "KMGT" + 1));
    text.remove_suffix(1);
  }
  auto n = number_of(text);
  if (!n || *n < 0 || *n * unit > 1e18) return std::nullopt;
  return static_cast<unsigned long long>(*n * unit);
}

// --health-path=PATH[:MIN_FREE], repeatable (PET_HEALTH_PATH: a comma list).
std::vector<agent::HealthPath> health_paths(const std::vector<RawValue>& values) {
  std::vector<agent::HealthPath> out;
  for (const RawValue& value : values) {
    std::vector<std::string_view> items{value.text};
    if (value.origin.starts_with("PET_")) items = split(value.text, ',');
    for (std::string_view item : items) {
      item = trim(item);
      agent::HealthPath p{std::string(item), 0};
      if (auto colon = item.rfind(':'); colon != std::string_view::npos) {
        auto bytes = byte_count(item.substr(colon + 1));
        if (!bytes)
          throw bad(value, fmt::format("'{}' is not a free-space minimum (bytes, or with K, M, G or T: 50G)",
                                       item.substr(colon + 1)));
        p = {std::string(item.substr(0, colon)), *bytes};
      }
      if (p.path.empty() || p.path.front() != '/')
        throw bad(value, "needs an absolute PATH[:MIN_FREE] (e.g. /scratch:50G)");
      out.push_back(std::move(p));
    }
  }
  return out;
}

void health_checks(const RawOptions& raw, agent::HealthChecks& h) {
  if (const RawValue* v = raw.find("health_check")) {
    if (trim(v->text).empty()) throw bad(*v, "needs a command (run by /bin/sh)");
    h.command = v->text;
  }
  if (const RawValue* v = raw.find("health_check_timeout")) {
    h.command_timeout = kill_timeout(*v);  // the same rule: seconds > 0
    if (h.command.empty()) throw bad(*v, "has no effect without --health-check");
  }
  h.paths = health_paths(raw.list("health_path"));
  if (const RawValue* v = raw.find("max_node_failures")) {
    auto n = integer_of(v->text);
    if (!n || *n < 0 || *n > 1000000) throw bad(*v, "must be a whole number >= 0 (0: never)");
    h.max_node_failures = static_cast<int>(*n);
  }
  if (const RawValue* v = raw.find("exclude_file")) h.exclude_file = event_log(*v);  // a file in an existing directory
}

}  // namespace

void apply_extensions(const RawOptions& raw, const Env& env, agent::Config& c,
                      std::vector<std::string>& warnings) {
  if (const RawValue* v = raw.find("event_log")) c.event_log = event_log(*v);

  std::optional<RawValue> port = health_port_value(raw, env);
  if (port) c.health_port = health_port(*port);
  c.health_host = kDefaultHealthHost;
  if (const RawValue* v = raw.find("health_host")) {
    c.health_host = health_host(*v);
    if (!port)
      warnings.push_back(v->shown() + " has no effect without --health-port (the server is off)");
  }

  if (const RawValue* v = raw.find("heartbeat_timeout")) c.heartbeat_timeout = heartbeat_timeout(*v);
  if (const RawValue* v = raw.find("kill_timeout")) c.kill_timeout = kill_timeout(*v);
  if (const RawValue* v = raw.find("hang_timeout")) c.hang_timeout = heartbeat_timeout(*v);
  section_timeouts(raw.list("section_timeout"), c.section_timeouts);
  if (const RawValue* v = raw.find("stack_dump_signal")) c.stack_dump_signal = stack_dump_signal(*v);
  if (const RawValue* v = raw.find("progress_pattern")) c.progress_pattern = progress_pattern(*v);
  if (const RawValue* v = raw.find("checkpoint_dir")) c.checkpoint_dir = checkpoint_dir(*v);
  if (const RawValue* v = raw.find("restart_policy"))
    if (auto why = agent::parse_restart_policy(v->text, c.restart_rule)) throw bad(*v, *why);
  if (const RawValue* v = raw.find("straggler_action")) {
    const auto action = agent::parse_straggler_action(v->text);
    if (!action) throw bad(*v, "must be report, replace or off");
    c.straggler_action = *action;
  }
  file_timer(env, c);
  containment(env, c);
  tty(raw, env, c);
  c.faults = parse_faults(raw, env);
  health_checks(raw, c.health);
}

std::string node_group(const RawOptions& raw, const Env& env) {
  if (const RawValue* v = raw.find("node_group")) {
    const std::string name(trim(v->text));
    if (name.empty() || name.size() > 128 ||
        std::any_of(name.begin(), name.end(), [](char ch) { return ch == '|' || std::iscntrl(static_cast<unsigned char>(ch)); }))
      throw bad(*v, "must be 1..128 characters, without '|' or control characters");
    return name;
  }
  // "s0.s4.node12" under SLURM_TOPOLOGY_ADDR_PATTERN "switch.switch.node".
  if (auto addr = from_env(env, "SLURM_TOPOLOGY_ADDR")) {
    const auto dot = addr->text.rfind('.');
    if (dot != std::string::npos && dot > 0) return addr->text.substr(0, dot);
  }
  return "";
}

void check_health_endpoint(const RawOptions& raw, const Env& env, const agent::Config& c) {
  std::optional<RawValue> port = health_port_value(raw, env);
  if (!port) return;
  const std::string& host = c.health_host;
  const bool every_interface = host.empty() || host == "0.0.0.0" || host == "::";
  if (!every_interface && !net::is_local_host(host)) {
    const RawValue* given = raw.find("health_host");
    throw bad(given != nullptr ? *given : RawValue{host, "--health-host"},
              "not an address of this machine, so the health server cannot listen on it");
  }
  if (c.health_port == 0) return;  // any free port
  // Where the server will bind (agent/report/health_server.cc): "" is [::] or else
  // 0.0.0.0, "localhost" is 127.0.0.1.
  std::vector<std::string> binds{host};
  if (host.empty()) binds = {"::", "0.0.0.0"};
  if (host == "localhost") binds = {"127.0.0.1"};
  for (const std::string& address : binds)
    if (net::port_in_use(address, c.health_port))
      throw bad(*port, fmt::format("port {} is already in use on {}; pick another port, or 0 for "
                                   "any free one",
                                   c.health_port, host.empty() ? "every interface" : host));
}

}  // namespace cxxrun::launcher
