// The job's restart history as the nodes share it (agent/verdict/history.h,
// job_history.h): records round-trip, nodes' views merge, strangers' text
// is refused without a crash, and a verdict kept in the log dir is where a
// requeued agent's count goes on.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/forensics/failure.h"
#include "agent/verdict/job_history.h"
#include "agent/verdict/judge.h"
#include "rendezvous/rendezvous.h"

using namespace cxxrun::agent;

TEST_CASE("a node's outcome and the history round-trip as one line of JSON", "[verdict]") {
  NodeOutcome o;
  o.tracked = true;
  o.progress = true;
  o.step = 30;
  o.checkpoints = 2;
  o.checkpoint_step = 20;
  o.checkpoint = "ckpt-20.pt";
  const std::string line = to_json(o);
  CHECK(line.find('\n') == std::string::npos);
  const auto back = node_outcome_from_json(line);
  REQUIRE(back);
  CHECK(back->step == 30u);
  CHECK(back->checkpoint == "ckpt-20.pt");
  CHECK(back->checkpoint_step == 20u);

  History h;
  h.judged = 4;
  h.key = "k";
  h.cause = "ValueError: x (t.py:1)";
  h.best_step = 31;
  h.repeats = 2;
  h.stop = true;
  h.evidence = "not restarting: ...";
  const auto hb = history_from_json(to_json(h));
  REQUIRE(hb);
  CHECK(hb->judged == 4);
  CHECK(hb->best_step == 31u);
  CHECK_FALSE(hb->at_step);
  CHECK(hb->stop);
  CHECK(hb->evidence == h.evidence);

  for (const char* bad : {"", "{", "[1]", "null", "{\"step\": 1}"}) {
    INFO(bad);
    CHECK_FALSE(history_from_json(bad));
  }
  for (const char* bad : {"", "{", "[1]", "null"}) {
    INFO(bad);
    CHECK_FALSE(node_outcome_from_json(bad));
  }
  // Wrong types read as unknown, never as a crash or a negative count.
  const auto odd = history_from_json("{\"judged\": \"x\", \"repeats\": -3, \"best_step\": -1}");
  REQUIRE(odd);
  CHECK(odd->judged == 0);
  CHECK(odd->repeats == 0);
  CHECK_FALSE(odd->best_step);
}

TEST_CASE("the job's view merges every node's: the highest step, any checkpoint", "[verdict]") {
  NodeOutcome rank0;  // prints the steps
  rank0.tracked = rank0.progress = true;
  rank0.step = 30;
  NodeOutcome other;  // writes the checkpoints, prints nothing
  other.tracked = true;
  other.checkpoints = 1;
  other.checkpoint_step = 20;
  other.checkpoint = "step_20";
  NodeOutcome silent;
  const NodeOutcome job = merge({silent, rank0, other});
  CHECK(job.tracked);
  CHECK(job.progress);
  CHECK(job.step == 30u);
  CHECK(job.checkpoints == 1);
  CHECK(job.checkpoint == "step_20");
}

namespace {

// The seam as a backend that shares nothing (local, static) sees it.
struct Alone : cxxrun::rendezvous::Rendezvous {
  cxxrun::rendezvous::Assignment join() override { return {}; }
  cxxrun::rendezvous::Assignment rejoin() override { return {}; }
  void renew_worker_store() override {}
  bool elastic() const override { return false; }
  std::chrono::milliseconds keep_alive_interval() const override { return {}; }
  bool keep_alive() override { return true; }
  Liveness check_members() override { return {}; }
  void watch(OnEvent) override {}
  void publish_failure(const std::string&) override {}
  cxxrun::rendezvous::RoundEvent finish_round() override { return {}; }
  std::vector<std::string> failure_records(std::chrono::milliseconds) override { return {}; }
  void leave(bool) override {}
  void inject(const cxxrun::rendezvous::StoreFault&) override {}
};

Failure nan_failure() {
  Failure f;
  f.pid = 42;
  f.exit_code = 1;
  f.traceback = "Traceback (most recent call last):\n  File \"/job/train.py\", line 61, in <module>\n    raise "
                "ValueError('loss is NaN')\nValueError: loss is NaN\n";
  return f;
}

}  // namespace

TEST_CASE("a requeued agent continues the count kept in its log dir", "[verdict]") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("cxxrun-history-" + std::to_string(::getpid()));
  // Run dirs as LogDir makes them: <run id>_<8 of [a-z0-9_]>.
  const fs::path first_run = base / "job7_ab_c1234", second_run = base / "job7_zzzz9999";
  fs::create_directories(first_run);
  fs::create_directories(second_run);
  Config c;
  c.log_dir = base.string();
  c.run_id = "job7";
  Alone alone;
  NodeOutcome at30;
  at30.tracked = at30.progress = true;
  at30.step = 30;
  {
    JobHistory first(c, first_run.string());
    CHECK(first.file() == (first_run / "history.json").string());
    CHECK(first.last().judged == 0);
    for (int i = 0; i < 2; ++i) {
      const History& h =
          first.adopt(JobHistory::settle(alone, first.ask(at30, {nan_failure()}, "node-a", 0, std::chrono::milliseconds(0))));
      CHECK_FALSE(h.stop);
      CHECK(h.cause == "ValueError: loss is NaN (train.py:61)");
    }
    CHECK(first.last().repeats == 2);
    CHECK(first.judged_here() == 2);
  }
  // Nothing but run dirs in the log dir: torchrun's layout.
  for (const auto& e : fs::directory_iterator(base)) CHECK(e.is_directory());
  JobHistory requeued(c, second_run.string());  // the same run id and log dir: the count goes on
  CHECK(requeued.last().judged == 2);
  CHECK(requeued.judged_here() == 0);
  const History& h =
      requeued.adopt(JobHistory::settle(alone, requeued.ask(at30, {nan_failure()}, "node-a", 0, std::chrono::milliseconds(0))));
  CHECK(h.stop);
  CHECK(h.repeats == 3);
  CHECK(requeued.judged_here() == 1);  // two of the three came from the earlier run

  Config other = c;
  other.run_id = "job8";
  CHECK(JobHistory(other, (base / "job8_00000000").string()).last().judged == 0);
  fs::create_directories(base / "job8_11111111");
  std::ofstream(base / "job8_11111111" / "history.json") << "not json";
  CHECK(JobHistory(other, (base / "job8_00000000").string()).last().judged == 0);  // logged and left alone
  Config no_log_dir = c;
  no_log_dir.log_dir.clear();  // a temporary base: nothing to continue
  CHECK(JobHistory(no_log_dir, (base / "job7_qqqqqqqq").string()).last().judged == 0);
  Config always = c;
  always.restart_rule.always = true;
  CHECK(JobHistory(always, second_run.string()).file().empty());
  fs::remove_all(base);
}

TEST_CASE("a failure's signature: cause, normalized words, where it came from", "[verdict]") {
  const Signature s = signature_of(nan_failure());
  CHECK(s.cause == "exception");
  CHECK(s.what == "ValueError: loss is NaN");
  CHECK(s.where == "/job/train.py:61");
  CHECK(s.text() == "ValueError: loss is NaN (train.py:61)");

  Failure code;
  code.pid = 7;
  code.exit_code = 3;
  CHECK(signature_of(code).text() == "exit code 3");

  Failure segv;
  segv.pid = 7;
  segv.signal = 11;
  CHECK(signature_of(segv).text() == "SIGSEGV");
  CHECK(signature_of(segv).cause == "crashed");

  Failure oom;
  oom.pid = 7;
  oom.signal = 9;
  oom.memory.oom_killed = true;
  oom.memory.limit = 64LL << 20;
  CHECK(signature_of(oom).text() == "an OOM kill (limit 64 MiB)");
  CHECK(signature_of(oom).cause == "oom-killed");
}
