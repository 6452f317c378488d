// A failure's root-cause signature: what the restart verdict compares
// between attempts to tell a failure that repeats from one that moves on
// (docs/restarts.md, "When a restart helps"). The cause class
// (agent/forensics/death.h), what the failure said of itself, normalized,
// and where it came from.
#pragma once

#include <string>

namespace cxxrun::agent {

struct Failure;

struct Signature {
  std::string cause;  // death_name(): "exception", "oom-killed", "killed-by-cxxrun", ...
  // In the user's words, to follow "ended with": "ValueError: loss is NaN",
  // "SIGSEGV", "exit code 3", "an OOM kill", "a kill by the hang watchdog:
  // no heartbeat for 10 s".
  std::string what;
  // Where it came from: the innermost frame of the user's own code
  // ("/x/train.py:61"), or for an OOM kill the memory limit in force
  // ("limit 512 MiB"): an OOM under another limit is a change. "" unknown.
  std::string where;

  // What two failures must share to be the same root cause: the cause,
  // `what` with numbers and addresses collapsed (a pid, a size, a time in
  // a message changes while the cause does not), and `where` as it is.
  std::string key() const;
  // "ValueError: loss is NaN (train.py:61)": the evidence line's words.
  std::string text() const;
};

Signature signature_of(const Failure& f);

// The key's normal form of a message: every run of digits (with the
// decimal point inside it) and every hex address becomes '#'.
std::string collapse_numbers(const std::string& text);

}  // namespace cxxrun::agent
