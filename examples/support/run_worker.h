// The failure handling every example shares: whatever stops a worker (bad
// environment, a collective that failed or timed out, an I/O error) becomes
// one line on stderr naming the program and rank, plus torchelastic's error
// file, so the launcher's failure summary says why instead of "exitcode 1".
#pragma once

#include <functional>
#include <string>

namespace cxxrun::examples {

// Runs `body` and returns its exit code, or 1 after reporting an exception.
int run_worker(const char* program, const std::function<int()>& body);

// Reports a deliberate failure the same way and returns the exit code (1).
int fail_worker(const char* program, const std::string& message);

}  // namespace cxxrun::examples
