// The restart verdict (agent/verdict/judge.h): the same root cause at the
// same step without progress stops the job after the budget; progress,
// another step or another cause restart; an OOM stops sooner; without a
// progress source only an OOM is judged; 'always' judges nothing.
#include <catch2/catch.hpp>

#include "agent/verdict/judge.h"

using namespace cxxrun::agent;

namespace {

Signature nan_at_61() { return {"exception", "ValueError: loss is NaN", "/job/train.py:61"}; }
Signature oom() { return {"oom-killed", "an OOM kill", "limit 64 MiB"}; }

JobOutcome failed(Signature root, std::optional<uint64_t> step, int checkpoints = 0,
                  std::optional<uint64_t> checkpoint_step = std::nullopt, bool tracked = true) {
  JobOutcome o;
  o.root = std::move(root);
  o.progress.tracked = tracked;
  o.progress.progress = step.has_value() || checkpoints > 0;
  o.progress.step = step;
  o.progress.checkpoints = checkpoints;
  o.progress.checkpoint_step = checkpoint_step;
  if (checkpoints > 0) o.progress.checkpoint = "ckpt-" + std::to_string(checkpoint_step.value_or(0)) + ".pt";
  return o;
}

// The verdicts of a run of attempts, each judged after the last.
std::vector<History> run(const std::vector<JobOutcome>& attempts, const RestartRule& rule = {}) {
  std::vector<History> out;
  History h;
  for (const JobOutcome& a : attempts) {
    h = judge(h, a, rule, static_cast<int>(out.size()));
    out.push_back(h);
  }
  return out;
}

}  // namespace

TEST_CASE("the same failure at the same step three times in a row stops, with the evidence", "[verdict]") {
  // The first attempt writes the step-0 checkpoint, then fails at step 30;
  // the restarts resume from it and fail at step 30 again.
  const auto v = run({failed(nan_at_61(), 30, 1, 0), failed(nan_at_61(), 30), failed(nan_at_61(), 30)});
  CHECK_FALSE(v[0].stop);
  CHECK(v[0].repeats == 1);
  CHECK_FALSE(v[1].stop);
  CHECK(v[1].repeats == 2);
  CHECK(v[1].evidence == "verdict: restart: 2 of 3 attempts in a row ended with ValueError: loss is NaN (train.py:61) at "
                         "step 30 without progress");
  CHECK(v[2].stop);
  CHECK(v[2].judged == 3);
  CHECK(v[2].evidence == "not restarting: 3 attempts in a row ended with ValueError: loss is NaN (train.py:61) at "
                         "step 30; no progress beyond step 30 and no checkpoint since step 0");
}

TEST_CASE("failures at other steps, or after progress, restart whatever their number", "[verdict]") {
  const auto v = run({failed(nan_at_61(), 17), failed(nan_at_61(), 5), failed(nan_at_61(), 12), failed(nan_at_61(), 40),
                      failed(nan_at_61(), 40, 1, 40), failed(nan_at_61(), 40, 1, 41)});
  for (const History& h : v) CHECK_FALSE(h.stop);
  CHECK(v[1].repeats == 1);
  CHECK(v[1].evidence == "verdict: restart: ValueError: loss is NaN (train.py:61) at step 5, at another step than the last "
                         "attempt");
  CHECK(v[3].best_step == 40u);
  CHECK(v[4].repeats == 1);  // the same step, but a new checkpoint
  CHECK(v[4].evidence == "verdict: restart: ValueError: loss is NaN (train.py:61) at step 40 again, after a new checkpoint "
                         "(ckpt-40.pt)");
  CHECK(v[5].repeats == 1);
}

TEST_CASE("a different cause starts the count again", "[verdict]") {
  Signature other{"exception", "KeyError: 'x'", "/job/train.py:70"};
  const auto v = run({failed(nan_at_61(), 30), failed(nan_at_61(), 30), failed(other, 30), failed(nan_at_61(), 30),
                      failed(nan_at_61(), 30)});
  CHECK(v[1].repeats == 2);
  CHECK(v[2].repeats == 1);
  CHECK(v[2].evidence == "verdict: restart: KeyError: 'x' (train.py:70) at step 30, a different cause from the last attempt");
  CHECK(v[4].repeats == 2);
  CHECK_FALSE(v[4].stop);
}

TEST_CASE("numbers in a message do not make a new cause; another frame does", "[verdict]") {
  Signature a{"exception", "RuntimeError: pid 1234 timed out after 30.5 s at 0x7f00ab", "/job/t.py:9"};
  Signature b{"exception", "RuntimeError: pid 99 timed out after 31.0 s at 0x7f1234", "/job/t.py:9"};
  Signature c{"exception", "RuntimeError: pid 99 timed out after 31.0 s at 0x7f1234", "/job/t.py:10"};
  CHECK(a.key() == b.key());
  CHECK(a.key() != c.key());
  CHECK(collapse_numbers("step 30 loss 0.25 at 0xdeadBEEF") == "step # loss # at #");
}

TEST_CASE("an OOM kill that repeats stops after two; under another limit it is a new cause", "[verdict]") {
  const auto v = run({failed(oom(), 3), failed(oom(), 3)});
  CHECK(v[1].stop);
  CHECK(v[1].evidence == "not restarting: 2 attempts in a row ended with an OOM kill (limit 64 MiB) at step 3; no "
                         "progress beyond step 3 and no checkpoint");
  Signature bigger{"oom-killed", "an OOM kill", "limit 128 MiB"};
  CHECK_FALSE(run({failed(oom(), 3), failed(bigger, 3)})[1].stop);
}

TEST_CASE("without a progress source only an OOM kill is judged", "[verdict]") {
  const auto plain = run({failed(nan_at_61(), std::nullopt, 0, std::nullopt, false),
                          failed(nan_at_61(), std::nullopt, 0, std::nullopt, false),
                          failed(nan_at_61(), std::nullopt, 0, std::nullopt, false),
                          failed(nan_at_61(), std::nullopt, 0, std::nullopt, false)});
  for (const History& h : plain) CHECK_FALSE(h.stop);
  CHECK(plain[3].evidence == "verdict: restart: ValueError: loss is NaN (train.py:61); no progress source tells a repeat "
                             "from progress");
  const auto ooms = run({failed(oom(), std::nullopt, 0, std::nullopt, false),
                         failed(oom(), std::nullopt, 0, std::nullopt, false)});
  CHECK(ooms[1].stop);
  CHECK(ooms[1].evidence == "not restarting: 2 attempts in a row ended with an OOM kill (limit 64 MiB); no progress "
                            "seen (no --progress-pattern, --checkpoint-dir or reported step) and no checkpoint");
}

TEST_CASE("progress that names no step counts as moving on", "[verdict]") {
  JobOutcome lines = failed(nan_at_61(), std::nullopt);
  lines.progress.progress = true;
  const auto v = run({lines, lines, lines, lines});
  for (const History& h : v) CHECK_FALSE(h.stop);
}

TEST_CASE("'always' never stops; budgets are the user's", "[verdict]") {
  RestartRule always;
  always.always = true;
  const auto v = run({failed(oom(), 3), failed(oom(), 3), failed(oom(), 3)}, always);
  for (const History& h : v) CHECK_FALSE(h.stop);
  RestartRule five;
  five.same_cause = 5;
  const auto w = run({failed(nan_at_61(), 30), failed(nan_at_61(), 30), failed(nan_at_61(), 30),
                      failed(nan_at_61(), 30), failed(nan_at_61(), 30)}, five);
  CHECK_FALSE(w[3].stop);
  CHECK(w[4].stop);
}

TEST_CASE("the words of --restart-policy", "[verdict]") {
  RestartRule r;
  CHECK_FALSE(parse_restart_policy("always", r));
  CHECK(r.always);
  CHECK_FALSE(parse_restart_policy("progress", r));
  CHECK_FALSE(r.always);
  CHECK(r.same_cause == 3);
  CHECK(r.oom == 2);
  CHECK_FALSE(parse_restart_policy("progress,same-cause=5,oom=1", r));
  CHECK(r.same_cause == 5);
  CHECK(r.oom == 1);
  CHECK(describe(r) == "progress,same-cause=5,oom=1");
  CHECK_FALSE(parse_restart_policy("oom=4", r));
  CHECK(r.oom == 4);
  CHECK(r.same_cause == 3);
  for (const char* bad : {"", "sometimes", "progress,", "same-cause=0", "same-cause=x", "oom=1001", "always,oom=2",
                          "progress,foo=1", "same-cause"}) {
    RestartRule untouched;
    untouched.oom = 7;
    INFO(bad);
    CHECK(parse_restart_policy(bad, untouched));
    CHECK(untouched.oom == 7);
  }
}

TEST_CASE("a hang counts only while progress does not advance", "[verdict]") {
  Signature hang{"killed-by-cxxrun", "a kill by the hang watchdog: no heartbeat for 10 s", ""};
  Signature hang_later{"killed-by-cxxrun", "a kill by the hang watchdog: no heartbeat for 12 s", ""};
  CHECK(hang.key() == hang_later.key());
  // Each attempt gets further before it hangs: never a repeat.
  const auto advancing = run({failed(hang, 100), failed(hang_later, 180), failed(hang, 260), failed(hang, 340)});
  for (const History& h : advancing) CHECK(h.repeats == 1);
  // A deadlock at the same step every time stops like any repeat.
  const auto stuck = run({failed(hang, 100), failed(hang_later, 100), failed(hang, 100)});
  CHECK(stuck[2].stop);
}
