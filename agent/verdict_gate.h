// What stands between a failed attempt and the restart policy's decision:
// the job's verdict on it (docs/restarts.md, "When a restart helps"). This
// node's view of the attempt goes to the rendezvous link's thread, where the
// nodes settle one verdict (agent/verdict/job_history.h); the verdict comes
// back on the loop, is kept (the log dir's history file), and is written to
// the event log. And the failure summary that follows a final verdict: every
// node's failures, gathered the same way, root cause first.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/forensics/failure.h"
#include "agent/verdict/history.h"
#include "agent/verdict/job_history.h"

namespace cxxrun::agent {

class RendezvousLink;
class Reporter;

// How long the verdict and the summary wait for every member's workers to
// stop: a member that is dead, or whose workers ignore SIGTERM, delays them
// by this much, not by the shutdown grace.
inline constexpr std::chrono::seconds kSummaryWait{3};

class VerdictGate {
 public:
  // `run_dir` keeps this run's history ("": none; agent/verdict/job_history.h).
  VerdictGate(const Config& config, const std::string& run_dir, RendezvousLink& link, Reporter& reporter,
              std::string host);

  // Whether failed attempts are judged (not --restart-policy=always).
  bool judges() const { return history_.judges(); }
  // Whether the streak of verdict `h` began in an earlier agent run of the
  // job (a requeue): it then ends the job whatever --max-restarts has left.
  bool spans_runs(const History& h) const { return h.repeats > history_.judged_here(); }
  // On the loop, later: `then(verdict)` once the nodes settled it on
  // `attempt`, which ended with `local` failures here and this node's
  // `outcome`. `then` runs on the loop; the caller checks it still wants it.
  void judge(int attempt, int round, const NodeOutcome& outcome, std::vector<Failure> local,
             std::function<void(const History&)> then);
  // On the loop, later: every node's failures (the rendezvous's records and
  // `local`), root cause first, once every member's workers stopped or
  // kSummaryWait passed.
  void gather_failures(std::vector<Failure> local, std::function<void(std::vector<Failure>)> then);

 private:
  RendezvousLink& link_;
  Reporter& reporter_;
  const std::string host_;
  JobHistory history_;
};

}  // namespace cxxrun::agent
