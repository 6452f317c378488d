// Option syntax only: the single file that includes CLI11. Values stay text
// here; build_config.cc gives them meaning.
#include "launcher/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>

#include "launcher/option_table.h"
#include "launcher/raw_options.h"

extern char** environ;

namespace cxxrun::launcher {
namespace {

struct Registered {
  const OptionSpec* spec;
  CLI::Option* option;
  std::unique_ptr<std::string> text;  // CLI11 writes here; stable address
};

bool flag_from_env(const OptionSpec& spec, const Env& env) {
  std::string name = env_name_of(spec);
  auto it = env.find(name);
  if (it == env.end()) return false;
  if (it->second == "0") return false;
  if (it->second == "1") return true;
  throw UsageError(name + "=" + it->second + ": " + main_name_of(spec) + " reads " + name +
                   " as 0 or 1");
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
    Registered r{&spec, nullptr, std::make_unique<std::string>()};
    if (spec.is_flag()) {
      r.option = app.add_flag(std::string(spec.names))->disable_flag_override();
    } else {
      r.option = app.add_option(std::string(spec.names), *r.text)
                     ->type_name(std::string(spec.metavar))
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    registered.push_back(std::move(r));
  }

  std::vector<std::string> reversed(args.rbegin(), args.rend());
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
  take_program(app.remaining(), raw);
  for (const Registered& r : registered) {
    const OptionSpec& spec = *r.spec;
    std::string dest = dest_of(spec);
    if (spec.is_flag()) {
      // Read the variable even when the flag is given: torchrun parses it up front.
      bool from_env = spec.env == EnvFallback::flag && flag_from_env(spec, env);
      if (r.option->count() > 0 || from_env) raw.flags.insert(dest);
      continue;
    }
    if (r.option->count() > 0) {
      std::string text = *r.text;
      // CLI11 keeps the '=' of "-r=3"; argparse drops it.
      if (spec.names.starts_with("-") && !spec.names.starts_with("--") && text.starts_with("="))
        text.erase(0, 1);
      raw.values[dest] = {text, main_name_of(spec)};
    } else if (auto it = env.find(env_name_of(spec));
               spec.env == EnvFallback::value && it != env.end()) {
      raw.values[dest] = {it->second, it->first};
    } else if (spec.default_value != nullptr) {
      raw.values[dest] = {spec.default_value, main_name_of(spec)};
    }
  }
  out.help = raw.flag("help");
  out.version = raw.flag("version");
  return raw;
}

}  // namespace

Env current_environment() {
  Env env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv = *entry;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Parsed parse(const std::vector<std::string>& args, const Env& env) {
  Parsed early;
  RawOptions raw = read_command_line(args, env, early);
  if (early.help || early.version) return early;
  return build_config(raw, env);
}

#ifndef CXXRUN_VERSION
#define CXXRUN_VERSION "0.1.0"
#endif

std::string version_text() { return std::string("cxxrun ") + CXXRUN_VERSION; }

}  // namespace cxxrun::launcher
