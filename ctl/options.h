// cxxrunctl's command line: which job to attach to (the rendezvous options
// as cxxrun takes them, their PET_* fallbacks and defaults) and what to do.
// docs/cxxrunctl.md is its contract.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/rendezvous.h"

namespace cxxrun::ctl {

// Bad input: one line naming the value and the rule (exit_code::usage).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Command { help, status, top, logs, stacks, stop };

struct Options {
  Command command = Command::help;
  // Backend (c10d or etcd), host and port (etcd: the first member), and
  // settings: run_id, token, read_timeout, etcd's members and keys.
  rendezvous::RendezvousConfig rdzv;
  // The deadline of the connect and of each call (--timeout).
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  bool json = false;                                // status --json
  std::chrono::milliseconds interval{1000};         // top --interval
  std::optional<int> iterations;                    // top -n: frames, then exit
  std::optional<int> rank;                          // logs, stacks --rank
  bool follow = false;                              // logs --follow
};

// The environment as the parse reads it (tests pass their own).
using Getenv = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> real_getenv(const std::string& name);

// argv without the program's name. Throws UsageError.
Options parse(const std::vector<std::string>& args, const Getenv& env = real_getenv);

// The usage text (--help), made from the two tables below.
std::string usage();

// One option as --help, the man page and the shell completions show it
// (packaging/docgen.cc makes the last two): one table, which the parse
// reads too, so the four cannot drift.
struct OptionDoc {
  std::string_view names;    // every spelling, comma-separated: "--follow,-f"
  std::string_view metavar;  // empty: a flag
  std::string_view env;      // the variable it falls back to; empty: none
  std::string_view choices;  // a fixed set of values, comma-separated; empty: any
  std::string_view help;
};
std::span<const OptionDoc> option_docs();

struct CommandDoc {
  std::string_view name;  // "logs"
  std::string_view args;  // "[--rank R] [--follow]"
  std::string_view help;
};
std::span<const CommandDoc> command_docs();

}  // namespace cxxrun::ctl
