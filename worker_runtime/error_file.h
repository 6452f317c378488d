// Writes torchelastic's error file (TORCHELASTIC_ERROR_FILE) so the launcher's
// failure summary shows why a C++ worker failed, as @record does for Python:
//   {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "<secs>",
//                                               "timestamp_ns": <ns>}}}
// (timestamp_ns is cxxrun's: torch ignores it, cxxrun orders failures by it).
#pragma once

#include <string>

namespace cxxrun::worker {

// Returns false when no error file is configured or it cannot be written.
bool write_error_file(const std::string& message, const std::string& details = "");

}  // namespace cxxrun::worker
