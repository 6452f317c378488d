// The two ways a command line is refused. main prints either as
// "cxxrun: error: <what()>" and exits 2; both are one line and name the
// offending value and the rule it broke.
#pragma once

#include <stdexcept>
#include <string>

namespace cxxrun::launcher {

// Bad syntax, an impossible combination, or a program that cannot be run.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A valid request for a feature that a later cxxrun will have.
class NotBuiltYet : public UsageError {
 public:
  using UsageError::UsageError;
};

}  // namespace cxxrun::launcher
