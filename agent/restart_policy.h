// What the agent does when its worker group has stopped, or while it waits
// for the rest of the job: exit with a code, restart here, re-form the job
// through a new rendezvous round, or wait. A pure function, so that every
// path is unit-tested (tests/unit/agent/test_restart_policy.cc).
//
// The exit codes themselves are in agent/exit_codes.h; this file decides
// which one a job gets.
#pragma once

#include <vector>

#include "agent/exit_codes.h"
#include "agent/forensics/failure.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

// Why the group stopped (or, while waiting, what just happened). Every way
// a job can end on this node is one of these: the agent exits only with a
// code decide() gave it.
enum class Cause {
  success,            // every local worker exited 0
  failure,            // a local worker failed (exit, signal, hang, exec error)
  remote_failure,     // a worker failed on another node (round event abort)
  membership,         // a node joined, or a member died (join / dead)
  lost,               // too few nodes are left, or the rendezvous store is gone
  signal,             // the agent was told to stop (SIGINT, SIGTERM, ...)
  rendezvous_failed,  // joining or re-forming the job failed, or the workers' store could not be renewed
  released,           // this node waited as a spare, and the job succeeded without it
  reported,           // the failure summary is out: exit with its code (Situation::summary)
  unhealthy,          // this node failed a health check before a round: it steps out (agent/health/node_health.h)
};

struct Situation {
  Cause cause = Cause::success;
  // What the rest of the job did, as far as this node knows (elastic only).
  rendezvous::RoundEvent job = rendezvous::RoundEvent::none;
  // Whether every node restarts together through a new rendezvous round.
  bool elastic = false;
  int attempt = 0;  // restarts used so far (TORCHELASTIC_RESTART_COUNT)
  int max_restarts = 0;
  int signal = 0;  // Cause::signal
  // Cause::membership: members alive afterwards, and --nnodes' minimum.
  int alive_nodes = 1;
  int min_nodes = 1;
  // A worker here outlived SIGKILL (agent/forensics/death.h): the node is unhealthy,
  // so the job ends here with the summary, whatever the cause or budget.
  bool unkillable = false;
  // Cause::reported: the failures the summary showed, root cause first.
  std::vector<Failure> summary;
  // The restart verdict (agent/verdict/judge.h) on the failure that ended
  // the attempt: the same root cause repeats without progress. It ends the
  // job while restarts are left, with exit_code::no_progress; with none
  // left, the job ends as it would have anyway.
  bool repeats_without_progress = false;
  // ... and the repeats began in an earlier agent run of the job (a
  // requeue that continued the count): the requeue is the restart, so the
  // job ends with exit_code::no_progress even with no restarts left here,
  // and the scheduler stops requeueing it.
  bool repeats_across_runs = false;
};

enum class Action {
  exit,     // exit with Decision::code
  fail,     // print the failure summary, exit with failure_exit_code() (or no_progress)
  restart,  // start the group again here, in the same round
  reform,   // re-form the job in a new rendezvous round, then start
  wait,     // this node is done; wait for the rest of the job
};

struct Decision {
  Action action = Action::exit;
  int code = 0;              // Action::exit
  bool uses_budget = false;  // restart / reform: counts against max_restarts
};

Decision decide(const Situation& s);

// The exit code of a failed job whose failures are `ordered` root cause
// first, by the first failure's cause (agent/forensics/death.h): a user's own failure
// passes its code through (128 + signal when killed); an OOM kill gives
// exit_code::oom, and so does a failure after the OOM killer killed one of
// the worker's children (MemoryEvidence::child_oom_kills); a hang cxxrun
// killed gives exit_code::hang. One the agent
// stopped has no code of its own, so the next is used; 1 when every listed
// failure was stopped, or none could be read. A worker that outlived SIGKILL
// anywhere in the list gives exit_code::unkillable.
int failure_exit_code(const std::vector<Failure>& ordered);

}  // namespace cxxrun::agent
