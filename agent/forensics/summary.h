// What the user reads about failed workers: torchrun's ChildFailedError box
// (docs/torchrun-compat.md §10.2) with each failure's cause (agent/forensics/death.h),
// and the one line the log gives each failure.
#pragma once

#include <string>
#include <vector>

#include "agent/forensics/failure.h"

namespace cxxrun::agent {

// One line for the log: "rank 1 (local_rank 1, pid 42) exited with code 3";
// "(local_rank 1, not started)" for a worker that never had a pid.
std::string describe(const Failure& f);

// The summary box. `failures` is non-empty; failures[0] is the root cause,
// or, when its no_root_cause is set, the first failure under a heading that
// says no root cause could be named, and why. A worker that never started
// shows "(pid: not started)".
std::string format_summary(const std::string& entrypoint, const std::string& host,
                           const std::vector<Failure>& failures);

}  // namespace cxxrun::agent
