// Option syntax only: the single file that includes CLI11. Values stay text
// here; build_config.cc gives them meaning.
#include "launcher/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "cxxrun_commit.h"
#include "launcher/abbreviations.h"
#include "launcher/fanout_options.h"
#include "launcher/kubeflow.h"
#include "launcher/option_table.h"
#include "launcher/raw_options.h"
#include "launcher/slurm.h"
#include "launcher/values.h"

namespace cxxrun::launcher {
namespace {

struct Registered {
  const OptionSpec* spec;
  CLI::Option* option;
  std::unique_ptr<std::string> text;  // CLI11 writes here; stable address
  std::unique_ptr<std::vector<std::string>> texts;  // the same, for repeatable options
};

// CLI11 reads "--log-dir=" as "--log-dir" and takes the next word as its
// value; argparse gives it "". So an empty "=value" travels as this marker and
// turns back into "" afterwards (in values, and in the program's own words).
constexpr std::string_view kEmpty = "\x01cxxrun-empty\x01";

std::string mark_empty(const std::string& arg) {
  bool empty_long_value = arg.size() > 3 && arg.starts_with("--") && arg.back() == '=';
  return empty_long_value ? arg + std::string(kEmpty) : arg;
}

std::string unmark_empty(std::string text) {
  if (text.ends_with(kEmpty)) text.erase(text.size() - kEmpty.size());
  return text;
}

bool flag_from_env(const OptionSpec& spec, const Env& env) {
  std::string name = env_name_of(spec);
  auto it = env.find(name);
  if (it == env.end()) return false;
  if (it->second == "0") return false;
  // Set but empty means on: the Kubeflow training operator writes
  // PET_STANDALONE="" for elasticPolicy.standalone (torchrun fails on it).
  if (it->second == "1" || it->second.empty()) return true;
  throw UsageError(name + "=" + it->second + ": " + main_name_of(spec) + " reads " + name +
                   " as 0 (off), 1 or empty (on)");
}

// CLI11 has already consumed the launcher's options; what it left starts with
// the program, or with an option it did not know.
void take_program(std::vector<std::string> rest, RawOptions& raw) {
  auto first = rest.begin();
  if (first != rest.end() && *first == "--") {
    ++first;  // "--" ends the launcher's options; the next word is the program
  } else if (first != rest.end() && first->size() > 1 && first->front() == '-') {
    throw UsageError("unrecognized option " + *first);
  }
  if (first == rest.end()) return;
  raw.has_program = true;
  raw.program = *first;
  raw.program_args.assign(first + 1, rest.end());
}

RawOptions read_command_line(const std::vector<std::string>& args, const Env& env, Parsed& out) {
  CLI::App app{"", "cxxrun"};
  app.set_help_flag();  // ours is in the table, so "-h" after the program stays the program's
  // Stop at the first positional: it and everything after it belong to the program.
  app.prefix_command();

  std::vector<Registered> registered;
  for (const OptionSpec& spec : option_table()) {
    Registered r{&spec, nullptr, std::make_unique<std::string>(),
                 std::make_unique<std::vector<std::string>>()};
    if (spec.is_flag()) {
      r.option = app.add_flag(std::string(spec.names))->disable_flag_override();
    } else if (spec.bare_value != nullptr) {
      // A flag that also takes "=VALUE": "--name{value}" is CLI11's way to say
      // what the flag alone means.
      std::string names;
      for (std::string_view name : spellings_of(spec))
        names += (names.empty() ? "" : ",") + std::string(name) + "{" + spec.bare_value + "}";
      r.option = app.add_flag(names, *r.text)
                     ->type_name(std::string(spec.metavar))
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else if (spec.repeatable) {
      // One value per occurrence: "--section-timeout a=1 train.py" must leave
      // the program alone.
      r.option = app.add_option(std::string(spec.names), *r.texts)
                     ->type_name(std::string(spec.metavar))
                     ->expected(1)
                     ->allow_extra_args(false)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    } else {
      r.option = app.add_option(std::string(spec.names), *r.text)
                     ->type_name(std::string(spec.metavar))
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    registered.push_back(std::move(r));
  }

  const std::vector<std::string> spelled_out = expand_abbreviations(args, option_table());
  std::vector<std::string> reversed;
  for (auto it = spelled_out.rbegin(); it != spelled_out.rend(); ++it)
    reversed.push_back(mark_empty(*it));
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    // CLI11 words "--standalone=1" as "standalone was given a disallowed flag override".
    if (auto at = what.find(" was given a disallowed flag override"); at != std::string::npos)
      throw UsageError("--" + what.substr(0, at) + " is a flag and takes no value");
    throw UsageError(what);
  }

  RawOptions raw;
  std::vector<std::string> rest = app.remaining();
  for (std::string& word : rest) word = unmark_empty(std::move(word));
  take_program(std::move(rest), raw);
  for (const Registered& r : registered) {
    const OptionSpec& spec = *r.spec;
    std::string dest = dest_of(spec);
    if (spec.is_flag()) {
      // Read the variable even when the flag is given: torchrun parses it up front.
      bool from_env = spec.env == EnvFallback::flag && flag_from_env(spec, env);
      if (r.option->count() > 0 || from_env) raw.flags.insert(dest);
      continue;
    }
    if (spec.repeatable) {
      std::vector<RawValue>& list = raw.lists[dest];
      if (r.option->count() > 0) {
        for (const std::string& text : *r.texts)
          list.push_back({unmark_empty(text), main_name_of(spec)});
      } else if (auto it = env.find(env_name_of(spec));
                 spec.env == EnvFallback::value && it != env.end()) {
        list.push_back({it->second, it->first});
      }
      if (list.empty()) raw.lists.erase(dest);
      continue;
    }
    if (r.option->count() > 0) {
      std::string text = unmark_empty(*r.text);
      // CLI11 keeps the '=' of "-r=3"; argparse drops it.
      if (spec.names.starts_with("-") && !spec.names.starts_with("--") && text.starts_with("="))
        text.erase(0, 1);
      raw.values[dest] = {text, main_name_of(spec)};
      raw.given.insert(dest);
    } else if (auto it = env.find(env_name_of(spec));
               spec.env == EnvFallback::value && it != env.end()) {
      raw.values[dest] = {it->second, it->first};
      raw.given.insert(dest);
    } else if (spec.default_value != nullptr) {
      raw.values[dest] = {spec.default_value, main_name_of(spec)};
    }
  }
  out.help = raw.flag("help");
  out.version = raw.flag("version");
  return raw;
}

// What the hosts run by default: this very binary's path (the same
// installation everywhere, as an ssh loop of `cxxrun` assumes).
std::string self_path() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("cxxrun") : self.string();
}

}  // namespace

Parsed parse(const std::vector<std::string>& args, const Env& env) {
  return parse(args, env, resolve_node_address());
}

Parsed parse(const std::vector<std::string>& args, const Env& env, const NodeAddress& slurm_node_address) {
  Parsed early;
  RawOptions raw = read_command_line(args, env, early);
  if (early.help || early.version) return early;
  if (wants_fanout(raw)) {
    // No agent runs here: the hosts' agents derive nothing from this
    // machine's scheduler.
    early.fanout = plan_fanout(raw, self_path());
    if (auto level = env.find("LOGLEVEL"); level != env.end())
      early.log_level = parse_log_level({level->second, "LOGLEVEL"});
    return early;
  }
  if (const RawValue* out = raw.find("token_out"))
    throw UsageError(out->shown() + ": only with --hostfile or --hosts (the token a launcher makes for its hosts)");
  std::optional<std::string> derived = apply_slurm(raw, env, slurm_node_address);
  if (!derived) derived = apply_master_env(raw, env);
  Parsed parsed = build_config(raw, env);
  if (derived) parsed.notes.insert(parsed.notes.begin(), *derived);
  parsed.from_launcher = raw.flag("from_launcher");
  return parsed;
}

#ifndef CXXRUN_VERSION
#define CXXRUN_VERSION "0.1.0"
#endif

std::string version_text() { return std::string("cxxrun ") + CXXRUN_VERSION + " (commit " + CXXRUN_COMMIT + ")"; }

}  // namespace cxxrun::launcher
