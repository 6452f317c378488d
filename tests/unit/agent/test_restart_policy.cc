// Every path through decide() and failure_exit_code(): the README's
// exit-code table row by row, then the restart budget, membership changes,
// an elastic node's wait for the rest of the job, and what wins over what.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "agent/restart_policy.h"

using namespace cxxrun::agent;
using cxxrun::rendezvous::RoundEvent;

namespace {

// A decision as one exact string, so a failed check shows both sides:
// "exit 143", "fail", "restart (budget)", "reform", "wait".
std::string show(const Decision& d) {
  if (d.action == Action::exit) return "exit " + std::to_string(d.code) + (d.uses_budget ? " (budget)" : "");
  std::string s = d.action == Action::fail      ? "fail"
                  : d.action == Action::restart ? "restart"
                  : d.action == Action::reform  ? "reform"
                                                : "wait";
  if (d.uses_budget) s += " (budget)";
  if (d.code != 0) s += " code " + std::to_string(d.code);
  return s;
}

std::string decide_for(Cause cause, bool elastic, int attempt, int max_restarts,
                       RoundEvent job = RoundEvent::none) {
  return show(decide({.cause = cause, .job = job, .elastic = elastic, .attempt = attempt, .max_restarts = max_restarts}));
}

Failure exited_with(int code, bool stopped = false) {
  Failure f;
  set_status(f, W_EXITCODE(code, 0));
  f.stopped = stopped;
  return f;
}

Failure killed_by(int sig, bool stopped = false) {
  Failure f;
  set_status(f, W_EXITCODE(0, sig));
  f.stopped = stopped;
  return f;
}

}  // namespace

// --- the README's exit-code table -------------------------------------------

TEST_CASE("restart policy: every worker exited 0 exits 0") {
  CHECK(decide_for(Cause::success, false, 0, 0) == "exit 0");
  CHECK(decide_for(Cause::success, false, 0, 3) == "exit 0");
  CHECK(decide_for(Cause::success, true, 0, 3, RoundEvent::done) == "exit 0");
  CHECK(exit_code::success == 0);
}

TEST_CASE("restart policy: a failed worker with no restarts left exits with its own code") {
  CHECK(decide_for(Cause::failure, false, 0, 0) == "fail");
  CHECK(decide_for(Cause::failure, true, 0, 0) == "fail");
  CHECK(failure_exit_code({exited_with(3)}) == 3);
  CHECK(failure_exit_code({exited_with(1)}) == 1);
  CHECK(failure_exit_code({killed_by(SIGSEGV)}) == 139);
  CHECK(failure_exit_code({killed_by(SIGABRT)}) == 134);
}

TEST_CASE("restart policy: a worker that could not be executed exits 127") {
  CHECK(exit_code::not_executable == 127);
  CHECK(decide_for(Cause::failure, false, 0, 0) == "fail");
  CHECK(failure_exit_code({exited_with(exit_code::not_executable)}) == 127);
}

TEST_CASE("restart policy: a hung worker SIGKILLed with no restarts left exits 137") {
  CHECK(decide_for(Cause::failure, false, 2, 2) == "fail");
  CHECK(failure_exit_code({killed_by(SIGKILL)}) == 137);
}

TEST_CASE("restart policy: the agent's SIGINT, SIGTERM, SIGHUP, SIGQUIT exit 128 + signal") {
  const std::pair<int, int> cases[] = {{SIGINT, 130}, {SIGTERM, 143}, {SIGHUP, 129}, {SIGQUIT, 131}};
  for (auto [sig, code] : cases) {
    INFO("signal " << sig);
    CHECK(show(decide({.cause = Cause::signal, .signal = sig})) == "exit " + std::to_string(code));
    CHECK(show(decide({.cause = Cause::signal, .elastic = true, .signal = sig})) == "exit " + std::to_string(code));
    CHECK(exit_code::signalled(sig) == code);
  }
}

TEST_CASE("restart policy: too few nodes or a lost store exits 244") {
  CHECK(decide_for(Cause::lost, false, 0, 0) == "exit 244");
  CHECK(decide_for(Cause::lost, true, 0, 0) == "exit 244");
  CHECK(show(decide({.cause = Cause::membership, .elastic = true, .alive_nodes = 1, .min_nodes = 2})) == "exit 244");
  CHECK(exit_code::lost == 244);
}

// --- the cause of the root failure picks the code (agent/forensics/death.h) ------------

TEST_CASE("restart policy: a user's own failure passes through; infrastructure causes get their own codes") {
  Failure oom = killed_by(SIGKILL);
  oom.pid = 42;
  oom.memory.oom_killed = true;
  CHECK(failure_exit_code({oom}) == exit_code::oom);
  CHECK(exit_code::oom == 241);

  Failure hang = killed_by(SIGKILL);
  hang.pid = 42;
  hang.killed_by = Killer::hang;
  CHECK(failure_exit_code({hang}) == exit_code::hang);
  CHECK(exit_code::hang == 240);
  // A file-timer request may name any signal, and the worker may handle it.
  Failure timer = exited_with(1);
  timer.pid = 42;
  timer.killed_by = Killer::file_timer;
  CHECK(failure_exit_code({timer}) == exit_code::hang);

  // An admin's kill -9 and a fault injection are not infrastructure: 137.
  Failure admin = killed_by(SIGKILL);
  admin.pid = 42;
  CHECK(failure_exit_code({admin}) == 137);
  Failure injected = killed_by(SIGKILL);
  injected.pid = 42;
  injected.killed_by = Killer::fault_injection;
  CHECK(failure_exit_code({injected}) == 137);

  // The root cause decides: a user's exit 3 first, its OOM-killed victim after.
  Failure user = exited_with(3);
  user.pid = 41;
  CHECK(failure_exit_code({user, oom}) == 3);
  CHECK(failure_exit_code({oom, user}) == exit_code::oom);

  // A program's own 240-245 would read as an infrastructure cause: 1.
  for (int code : {240, 241, 242, 243, 244, 245}) {
    Failure own = exited_with(code);
    own.pid = 41;
    CHECK(failure_exit_code({own}) == exit_code::unknown_failure);
  }
  Failure near = exited_with(239);
  near.pid = 41;
  CHECK(failure_exit_code({near}) == 239);
  CHECK(failure_exit_code({exited_with(246)}) == 246);
}

TEST_CASE("restart policy: an unkillable worker wins over every other failure, and is never restarted") {
  Failure user = exited_with(3);
  user.pid = 41;
  Failure stuck = killed_by(SIGKILL);
  stuck.pid = 42;
  stuck.unkillable = true;
  CHECK(failure_exit_code({user, stuck}) == exit_code::unkillable);
  CHECK(exit_code::unkillable == 242);
  CHECK(show(decide({.cause = Cause::failure, .attempt = 0, .max_restarts = 3, .unkillable = true})) == "fail");
  CHECK(show(decide({.cause = Cause::signal, .signal = SIGTERM, .unkillable = true})) == "fail");
  CHECK(show(decide({.cause = Cause::lost, .unkillable = true})) == "fail");
  CHECK(show(decide({.cause = Cause::reported, .unkillable = true, .summary = {user, stuck}})) == "exit 242");
}

TEST_CASE("restart policy: usage, rendezvous and spare exit codes") {
  CHECK(exit_code::usage == 2);
  CHECK(exit_code::rendezvous_failed == 1);
  CHECK(exit_code::spare_released == 0);
  CHECK(exit_code::unknown_failure == 1);
}

TEST_CASE("restart policy: a failed rendezvous, a released spare and a printed summary are decided too") {
  // Every way a job ends goes through decide(): these exited with codes
  // the supervisor and the agent chose themselves.
  CHECK(decide_for(Cause::rendezvous_failed, true, 0, 3) == "exit 1");
  CHECK(decide_for(Cause::released, true, 0, 0) == "exit 0");
  CHECK(show(decide({.cause = Cause::reported, .summary = {exited_with(3)}})) == "exit 3");
  CHECK(show(decide({.cause = Cause::reported, .summary = {killed_by(SIGTERM, true), killed_by(SIGSEGV)}})) == "exit 139");
  // A failure on another node whose record could not be read.
  CHECK(show(decide({.cause = Cause::reported})) == "exit 1");
  CHECK(exit_code::signalled(SIGKILL) == 137);
}

// --- the restart budget --------------------------------------------------------

TEST_CASE("restart policy: a local failure restarts within the budget, then fails") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    INFO("attempt " << attempt);
    CHECK(decide_for(Cause::failure, false, attempt, 3) == "restart (budget)");
    CHECK(decide_for(Cause::failure, true, attempt, 3) == "reform (budget)");
  }
  CHECK(decide_for(Cause::failure, false, 3, 3) == "fail");
  CHECK(decide_for(Cause::failure, true, 3, 3) == "fail");
  CHECK(decide_for(Cause::failure, false, 4, 3) == "fail");
  CHECK(decide_for(Cause::failure, false, 0, 0) == "fail");
  CHECK(decide_for(Cause::failure, true, 0, 0) == "fail");
}

TEST_CASE("restart policy: an abort elsewhere, before or after this node succeeded, uses the budget") {
  for (Cause cause : {Cause::remote_failure, Cause::success}) {
    INFO("cause " << static_cast<int>(cause));
    CHECK(decide_for(cause, true, 0, 2, RoundEvent::abort) == "reform (budget)");
    CHECK(decide_for(cause, true, 1, 2, RoundEvent::abort) == "reform (budget)");
    CHECK(decide_for(cause, true, 2, 2, RoundEvent::abort) == "fail");
    CHECK(decide_for(cause, true, 0, 0, RoundEvent::abort) == "fail");
  }
}

// --- membership changes ------------------------------------------------------

TEST_CASE("restart policy: a join or a death re-forms without the budget") {
  for (RoundEvent job : {RoundEvent::join, RoundEvent::dead}) {
    INFO("job event " << static_cast<int>(job));
    Situation s{.cause = Cause::membership, .job = job, .elastic = true, .max_restarts = 2, .alive_nodes = 3, .min_nodes = 2};
    CHECK(show(decide(s)) == "reform");
    s.attempt = 2;  // the budget is spent
    CHECK(show(decide(s)) == "reform");
    s.max_restarts = 0;
    CHECK(show(decide(s)) == "reform");
  }
}

TEST_CASE("restart policy: a death leaving fewer than min_nodes alive exits 244") {
  Situation s{.cause = Cause::membership, .job = RoundEvent::dead, .elastic = true, .max_restarts = 3};
  s.alive_nodes = 2; s.min_nodes = 2;
  CHECK(show(decide(s)) == "reform");
  s.alive_nodes = 1;
  CHECK(show(decide(s)) == "exit 244");
  s.alive_nodes = 0; s.min_nodes = 1;
  CHECK(show(decide(s)) == "exit 244");
}

// --- an elastic node whose own workers succeeded -------------------------------

TEST_CASE("restart policy: an elastic node that succeeded waits for the rest of the job") {
  CHECK(decide_for(Cause::success, true, 0, 3, RoundEvent::none) == "wait");
  CHECK(decide_for(Cause::success, true, 3, 3, RoundEvent::none) == "wait");
  CHECK(decide_for(Cause::success, true, 0, 3, RoundEvent::done) == "exit 0");
  CHECK(decide_for(Cause::success, true, 3, 3, RoundEvent::done) == "exit 0");
}

TEST_CASE("restart policy: a join or death after this node succeeded re-forms") {
  for (RoundEvent job : {RoundEvent::join, RoundEvent::dead}) {
    INFO("job event " << static_cast<int>(job));
    CHECK(decide_for(Cause::success, true, 0, 2, job) == "reform");
    CHECK(decide_for(Cause::success, true, 2, 2, job) == "reform");
  }
}

// --- what wins -----------------------------------------------------------------

TEST_CASE("restart policy: the agent's signal wins over everything") {
  Situation s{.cause = Cause::signal, .job = RoundEvent::abort, .elastic = true, .attempt = 0, .max_restarts = 3,
              .signal = SIGTERM};
  CHECK(show(decide(s)) == "exit 143");  // attempts remain, the job aborted
  s.elastic = false;
  CHECK(show(decide(s)) == "exit 143");
  s.elastic = true; s.job = RoundEvent::done; s.signal = SIGINT;
  CHECK(show(decide(s)) == "exit 130");
  s.job = RoundEvent::join; s.signal = SIGHUP;
  CHECK(show(decide(s)) == "exit 129");
  s.job = RoundEvent::dead; s.alive_nodes = 0; s.min_nodes = 2; s.signal = SIGQUIT;
  CHECK(show(decide(s)) == "exit 131");
}

TEST_CASE("restart policy: a lost store wins over a pending restart") {
  CHECK(decide_for(Cause::lost, true, 0, 3, RoundEvent::abort) == "exit 244");
  CHECK(decide_for(Cause::lost, true, 0, 3, RoundEvent::join) == "exit 244");
  CHECK(decide_for(Cause::lost, false, 0, 3) == "exit 244");
}

// --- failure_exit_code -----------------------------------------------------------

TEST_CASE("restart policy: the first failure in order gives the exit code") {
  CHECK(failure_exit_code({exited_with(3), exited_with(5)}) == 3);
  CHECK(failure_exit_code({exited_with(5), exited_with(3)}) == 5);
  CHECK(failure_exit_code({killed_by(SIGSEGV), exited_with(3)}) == 139);
  CHECK(failure_exit_code({exited_with(3), killed_by(SIGSEGV)}) == 3);
}

TEST_CASE("restart policy: failures the agent stopped are skipped") {
  CHECK(failure_exit_code({killed_by(SIGTERM, true), exited_with(7)}) == 7);
  CHECK(failure_exit_code({killed_by(SIGTERM, true), killed_by(SIGKILL, true), killed_by(SIGBUS)}) == 128 + SIGBUS);
  CHECK(failure_exit_code({killed_by(SIGTERM, true)}) == 1);
  CHECK(failure_exit_code({killed_by(SIGTERM, true), exited_with(9, true)}) == 1);
  CHECK(failure_exit_code({}) == 1);
}

TEST_CASE("restart policy: a verdict that failures repeat ends the job early with 245, and only then") {
  Situation s{.cause = Cause::failure, .attempt = 1, .max_restarts = 5};
  s.repeats_without_progress = true;
  CHECK(show(decide(s)) == "fail");
  s.elastic = true;
  s.cause = Cause::remote_failure;
  CHECK(show(decide(s)) == "fail");
  s.cause = Cause::success;  // this node succeeded; the job aborted
  s.job = RoundEvent::abort;
  CHECK(show(decide(s)) == "fail");

  // The summary is out: 245, not the failure's own code.
  Situation reported{.cause = Cause::reported, .attempt = 2, .max_restarts = 5};
  reported.summary = {exited_with(1)};
  reported.repeats_without_progress = true;
  CHECK(show(decide(reported)) == "exit 245");
  Failure oom = killed_by(SIGKILL);
  oom.pid = 42;
  oom.memory.oom_killed = true;
  reported.summary = {oom};
  CHECK(show(decide(reported)) == "exit 245");  // an OOM that repeats: a final verdict, not "more memory, retry"
  // With no restarts left the job ends as it would have: the verdict
  // changed nothing.
  reported.attempt = 5;
  CHECK(show(decide(reported)) == "exit 241");
  // ... unless the repeats began before a requeue: the requeue was the
  // restart, and 245 tells the scheduler not to requeue again.
  reported.repeats_across_runs = true;
  CHECK(show(decide(reported)) == "exit 245");
  reported.repeats_across_runs = false;
  // A worker that outlived SIGKILL still wins.
  reported.attempt = 2;
  Failure stuck = exited_with(1);
  stuck.unkillable = true;
  reported.summary = {stuck};
  CHECK(show(decide(reported)) == "exit 242");
  // No verdict: the budget as before.
  Situation plain{.cause = Cause::failure, .attempt = 1, .max_restarts = 5};
  CHECK(show(decide(plain)) == "restart (budget)");
}
