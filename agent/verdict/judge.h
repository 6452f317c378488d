// Whether a restart helps: the verdict before every restart
// (docs/restarts.md, "When a restart helps"). Pure: the history so far and
// the job's view of the attempt that just failed in, the history after it
// out, with the verdict and its one line of evidence. The supervisor settles
// it with the other nodes (agent/verdict/job_history.h) and
// agent/restart_policy.h's decide() acts on it.
//
// The rule (--restart-policy=progress, the default):
//   - an attempt repeats the last one when it ended with the same root
//     cause (Signature::key) at the same step, and made no progress beyond
//     it: no step higher than the job ever reached, no new checkpoint, and
//     not progress that names no step (which cannot be compared, so it
//     counts as moving on);
//   - `same_cause` attempts in a row (3), or `oom` for an OOM kill (2),
//     ending so stop the job: exit_code::no_progress;
//   - without any progress source only an OOM kill can repeat (under the
//     same limit, it will again); other failures restart as torchrun's
//     would, up to --max-restarts.
// --restart-policy=always: torchrun's blind restarts, nothing is judged.
#pragma once

#include <optional>
#include <string>

#include "agent/config.h"
#include "agent/verdict/history.h"

namespace cxxrun::agent {

// Parses --restart-policy's value: "progress" or "always", or "progress"
// followed by ",same-cause=N" and/or ",oom=N" (either alone implies
// "progress"), N in 1..1000. nullopt and `rule` set, or why it is refused.
std::optional<std::string> parse_restart_policy(const std::string& text, RestartRule& rule);
// The policy in the words parse_restart_policy() reads.
std::string describe(const RestartRule& rule);

// The history after the attempt `now`, judged in `round`: its `stop` and
// `evidence` are the verdict.
History judge(const History& before, const JobOutcome& now, const RestartRule& rule, int round);

}  // namespace cxxrun::agent
