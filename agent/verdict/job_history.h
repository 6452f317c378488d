// One history for the job (docs/restarts.md): before every restart, the
// nodes share what each saw of the attempt, settle one verdict through the
// rendezvous (agent/verdict/judge.h decides it; the first proposal stored
// stands, so every node acts on the same), and each keeps the last verdict
// in the log dir, where an agent started again under the same run id (a
// Slurm requeue) continues the count instead of starting from zero.
//
// The log dir's layout stays torchrun's: the history is a file in this
// run's own directory (<--log-dir>/<run id>_<random>/history.json), and a
// new run looks for the newest in its siblings of the same run id.
//
// Two halves on two threads: settle() runs on the rendezvous link's thread
// (its calls block, each with a deadline) over copies it is given; adopt()
// and the rest run on the supervisor's loop.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/forensics/failure.h"
#include "agent/verdict/history.h"

namespace cxxrun::rendezvous {
class Rendezvous;
}

namespace cxxrun::agent {

class JobHistory {
 public:
  // Reads the last verdict an earlier run of this run id left in --log-dir,
  // if any (a file that is not this user's, or does not parse, is left
  // alone, logged); this run keeps its own in `run_dir` ("" : nowhere).
  JobHistory(const Config& config, const std::string& run_dir);

  // Whether failed attempts are judged (not --restart-policy=always).
  bool judges() const { return !rule_.always; }
  const RestartRule& rule() const { return rule_; }
  // The last settled verdict: the count a new one continues.
  const History& last() const { return last_; }
  // Where this run keeps its last verdict: <run dir>/history.json; "" when
  // there is no run dir (--log-dir=/dev/null) or nothing is judged.
  const std::string& file() const { return file_; }
  // Failed attempts judged since this agent started: a verdict whose
  // repeats are more came to it from an earlier run (a requeue).
  int judged_here() const { return last_.judged - judged_before_; }

  // What the link's thread needs to settle a verdict, copied on the loop.
  struct Ask {
    std::string mine;               // this node's NodeOutcome, as JSON
    std::vector<Failure> local;     // this node's failures of the attempt
    std::string host;
    History last;
    RestartRule rule;
    int round = 0;
    std::chrono::milliseconds wait{0};  // for every member's workers to stop
  };
  Ask ask(const NodeOutcome& mine, std::vector<Failure> local, const std::string& host, int round,
          std::chrono::milliseconds wait) const;
  // On the link's thread: shares `ask.mine`, reads every node's record and
  // failure, proposes judge() over the newer of the rendezvous's last
  // verdict and this node's, and returns the verdict that stands (JSON).
  static std::string settle(rendezvous::Rendezvous& r, const Ask& ask);

  // On the loop: the settled verdict becomes the last one, and is kept in
  // the log dir. One that does not parse (a stranger's writing) leaves the
  // history as it was and restarts: the budget is --max-restarts then.
  const History& adopt(const std::string& settled);

 private:
  void save() const;

  RestartRule rule_;
  std::string file_;
  History last_;
  int judged_before_ = 0;
};

}  // namespace cxxrun::agent
