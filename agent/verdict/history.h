// The job's restart history (docs/restarts.md, "One history for the job"):
// what each node saw of an attempt (NodeOutcome), merged into the job's
// (JobOutcome), and the state every verdict leaves behind (History), which
// the next verdict starts from. Each is one line of JSON, so the rendezvous
// carries them between nodes and the log dir keeps the last across a
// requeue. Text from the store or a file is another process's writing:
// what does not parse is nullopt, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/verdict/signature.h"

namespace cxxrun::agent {

struct AttemptRecord;

// One node's view of the attempt that just ended.
struct NodeOutcome {
  bool tracked = false;   // a progress source spoke on this node (in this attempt or before)
  bool progress = false;  // it saw progress in this attempt
  std::optional<uint64_t> step;  // the highest step it saw
  int checkpoints = 0;           // checkpoints that appeared in the attempt
  std::optional<uint64_t> checkpoint_step;  // the last one's step
  std::string checkpoint;                   // the last one's name
};
// `record` is nullopt where progress is not tracked (ProgressTracker).
NodeOutcome outcome_of(const std::optional<AttemptRecord>& record);
std::string to_json(const NodeOutcome& o);
std::optional<NodeOutcome> node_outcome_from_json(const std::string& line);

// The job's view: every node's merged (often only rank 0 prints steps, or
// writes checkpoints), and the job's root cause.
struct JobOutcome {
  NodeOutcome progress;
  std::optional<Signature> root;  // nullopt: no failure could be read
};
NodeOutcome merge(const std::vector<NodeOutcome>& nodes);

// The state after a verdict. Attempts are counted across agent runs of the
// same run id and log dir, not only this one's restarts.
struct History {
  int judged = 0;  // failed attempts judged so far
  int round = -1;  // the rendezvous round the last verdict was settled in
  std::string key;    // the last root cause (Signature::key); "" none
  std::string cause;  // its words (Signature::text)
  bool oom = false;   // it was an OOM kill
  std::optional<uint64_t> at_step;    // the last failed attempt's highest step
  std::optional<uint64_t> best_step;  // the highest step the job ever reached
  std::optional<uint64_t> checkpoint_step;  // the job's last checkpoint's step
  std::string checkpoint;                   // and name; "" none seen
  bool tracked = false;  // a progress source ever spoke
  int repeats = 0;       // attempts in a row that ended with `key` without progress between them
  bool stop = false;     // the verdict: stop (else restart)
  std::string evidence;  // the verdict's one line
};
std::string to_json(const History& h);
std::optional<History> history_from_json(const std::string& line);

}  // namespace cxxrun::agent
