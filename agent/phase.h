// Where one node's supervisor is in an attempt (agent/supervisor.cc), and
// what each phase shows outside: its word on the job board (cxxrunctl,
// docs/cxxrunctl.md) and the worker group's state on /healthz.
#pragma once

#include "agent/report/health_snapshot.h"

namespace cxxrun::agent {

// running: workers up. stopping: taking the group down. restarting: a
// restart here is being prepared. rendezvous: the link re-forms the job.
// barrier: our workers succeeded, others' not yet. reporting: gathering the
// job's failures for the summary. judging: settling the restart verdict
// with the other nodes (agent/verdict/job_history.h).
enum class Phase { running, stopping, restarting, rendezvous, barrier, judging, reporting, done };

// The board's word for a phase: its name, "done" for done.
const char* phase_name(Phase p);

// The group's state in `p`: `paused` (a running group stopped by a health
// check) is unhealthy; once done, `exit_code` says succeeded or failed.
GroupState group_state(Phase p, bool paused, int exit_code);

}  // namespace cxxrun::agent
