// --inject-fault and CXXRUN_INJECT_FAULTS: KIND:KEY=VALUE,... specs.
#include <algorithm>
#include <csignal>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "launcher/extensions.h"
#include "launcher/values.h"

namespace cxxrun::launcher {
namespace {

using Kind = agent::FaultSpec::Kind;

struct KindRule {
  std::string_view name;
  Kind kind;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
};

const std::vector<KindRule>& kind_rules() {
  static const std::vector<KindRule> rules = {
      {"kill", Kind::kill, {"rank", "after"}, {"signal", "attempt"}},
      {"stop", Kind::stop, {"rank", "after"}, {"attempt"}},
      {"drop_store", Kind::drop_store, {"node", "after"}, {}},
      {"delay_store", Kind::delay_store, {"node", "ms"}, {}},
  };
  return rules;
}

UsageError bad_fault(const RawValue& value, const std::string& rule) {
  return UsageError(fmt::format("{}: {}", value.shown(), rule));
}

bool contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Integers >= 0 that fit an int (ranks, nodes, attempts) or a long long (ms).
long long non_negative(const RawValue& value, std::string_view key, std::string_view text,
                       long long max = std::numeric_limits<int>::max()) {
  auto n = integer_of(text);
  if (!n || *n < 0 || *n > max)
    throw bad_fault(value, fmt::format("{}={} must be an integer >= 0", key, trim(text)));
  return *n;
}

}  // namespace

agent::FaultSpec parse_fault_spec(const RawValue& value) {
  std::string_view text = trim(value.text);
  if (text.empty()) throw bad_fault(value, "empty fault spec (e.g. kill:rank=0,after=1000)");
  auto colon = text.find(':');
  std::string_view kind_name = trim(text.substr(0, colon));
  std::string_view rest = colon == std::string_view::npos ? "" : text.substr(colon + 1);

  const auto& rules = kind_rules();
  auto rule = std::find_if(rules.begin(), rules.end(),
                           [&](const KindRule& r) { return r.name == kind_name; });
  if (rule == rules.end())
    throw bad_fault(value, fmt::format("unknown fault kind '{}' (kill, stop, drop_store, delay_store; "
                                 "e.g. kill:rank=0,after=1000)",
                                 kind_name));

  std::map<std::string_view, std::string_view> keys;
  if (!trim(rest).empty()) {
    for (std::string_view item : split(rest, ',')) {
      auto eq = item.find('=');
      std::string_view key = trim(item.substr(0, eq));
      if (eq == std::string_view::npos || key.empty())
        throw bad_fault(value, fmt::format("'{}' is not KEY=VALUE", trim(item)));
      if (!contains(rule->required, key) && !contains(rule->optional, key)) {
        std::vector<std::string_view> all = rule->required;
        all.insert(all.end(), rule->optional.begin(), rule->optional.end());
        throw bad_fault(value, fmt::format("unknown key '{}' for a {} fault (keys: {})", key,
                                     rule->name, fmt::join(all, ", ")));
      }
      if (!keys.emplace(key, item.substr(eq + 1)).second)
        throw bad_fault(value, fmt::format("key '{}' given twice", key));
    }
  }
  for (std::string_view key : rule->required)
    if (!keys.contains(key))
      throw bad_fault(value, fmt::format("a {} fault needs {}=", rule->name, key));

  agent::FaultSpec fault;
  fault.kind = rule->kind;
  for (auto [key, text_value] : keys) {
    using std::chrono::milliseconds;
    constexpr long long kMaxMs = std::numeric_limits<long long>::max() / 1000;
    if (key == "rank") fault.rank = static_cast<int>(non_negative(value, key, text_value));
    if (key == "node") fault.node = static_cast<int>(non_negative(value, key, text_value));
    if (key == "attempt") fault.attempt = static_cast<int>(non_negative(value, key, text_value));
    if (key == "after") fault.after = milliseconds(non_negative(value, key, text_value, kMaxMs));
    if (key == "ms") fault.delay = milliseconds(non_negative(value, key, text_value, kMaxMs));
    if (key == "signal") {
      fault.signal = signal_of(text_value);
      if (fault.signal == 0)
        throw bad_fault(value, fmt::format("signal={} is not a signal name or number", trim(text_value)));
    }
  }
  return fault;
}

namespace {

// Every spec with the value it came from, so that a later check can name it.
std::vector<std::pair<RawValue, agent::FaultSpec>> given_faults(const RawOptions& raw,
                                                                const Env& env) {
  std::vector<std::pair<RawValue, agent::FaultSpec>> faults;
  auto add = [&](std::string_view spec, const std::string& origin) {
    RawValue value{std::string(trim(spec)), origin};
    agent::FaultSpec fault = parse_fault_spec(value);
    faults.emplace_back(std::move(value), fault);
  };
  for (const RawValue& given : raw.list("inject_fault")) {
    // "--inject-fault=" is a mistake; so is "a;;b" on the command line.
    for (std::string_view spec : split(given.text, ';')) add(spec, given.origin);
  }
  if (auto it = env.find("CXXRUN_INJECT_FAULTS"); it != env.end()) {
    for (std::string_view spec : split(it->second, ';'))
      if (!trim(spec).empty()) add(spec, it->first);  // "", "a;" and the like
  }
  return faults;
}

std::string plural(long long n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

}  // namespace

std::vector<agent::FaultSpec> parse_faults(const RawOptions& raw, const Env& env) {
  std::vector<agent::FaultSpec> faults;
  for (auto& [value, fault] : given_faults(raw, env)) faults.push_back(fault);
  return faults;
}

void check_fault_targets(const RawOptions& raw, const Env& env, const JobBounds& job) {
  // A target outside the job is never found, so the fault silently never
  // fires. Ranks are bounded by the largest world the job can have: another
  // node may join later and hold the rank, so this node's own ranks are no bound.
  const long long world = static_cast<long long>(job.nproc_per_node) * job.max_nodes;
  for (const auto& [value, f] : given_faults(raw, env)) {
    using Kind = agent::FaultSpec::Kind;
    const bool worker_fault = f.kind == Kind::kill || f.kind == Kind::stop;
    if (worker_fault && f.rank >= world)
      throw bad_fault(value, fmt::format("rank={} is out of range: the job has at most {} ({} per node x "
                                   "{}), ranks 0..{}",
                                   f.rank, plural(world, "worker"), job.nproc_per_node,
                                   plural(job.max_nodes, "node"), world - 1));
    if (!worker_fault && f.node >= job.max_nodes)
      throw bad_fault(value, fmt::format("node={} is out of range: the job has at most {}, node ranks "
                                   "0..{}",
                                   f.node, plural(job.max_nodes, "node"), job.max_nodes - 1));
    // Attempts count restarts (TORCHELASTIC_RESTART_COUNT); a membership
    // change does not use one, so the last attempt is --max-restarts.
    if (worker_fault && f.attempt > job.max_restarts)
      throw bad_fault(value, fmt::format("attempt={} never comes: {} allows attempts 0..{}", f.attempt,
                                   job.max_restarts_value, job.max_restarts));
  }
}

}  // namespace cxxrun::launcher
