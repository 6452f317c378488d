#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/forensics/failure.h"
#include "agent/restart_policy.h"
#include "agent/forensics/summary.h"

using namespace cxxrun::agent;

// Failures here are written by their first fields in order (rank, pid, exit
// status, time, ...); the evidence fields after them keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace {

std::string temp_file(const std::string& content) {
  char tmpl[] = "/tmp/cxxrun_err_XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, content.data(), content.size()) == ssize_t(content.size()));
  close(fd);
  return tmpl;
}

}  // namespace

TEST_CASE("exit codes follow the shell's convention") {
  Failure f;
  set_status(f, W_EXITCODE(3, 0));
  CHECK(shell_exit_code(f) == 3);
  set_status(f, W_EXITCODE(0, SIGKILL));
  CHECK(f.signal == SIGKILL);
  CHECK(shell_exit_code(f) == 137);
}

TEST_CASE("signal names") {
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(signal_name(999) == "signal 999");
}

TEST_CASE("error file: torch's dict form shows the python call stack") {
  auto path = temp_file(
      R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback\nValueError: boom", "timestamp": "1795361529"}}})");
  auto m = read_error_file(path);
  unlink(path.c_str());
  REQUIRE(m);
  CHECK(m->text == "Traceback\nValueError: boom");
  REQUIRE(m->time);
  CHECK(std::chrono::system_clock::to_time_t(*m->time) == 1795361529);
}

TEST_CASE("error file: string form, garbage and missing files") {
  auto path = temp_file(R"({"message": "plain words", "timestamp": 12})");
  auto m = read_error_file(path);
  unlink(path.c_str());
  REQUIRE(m);
  CHECK(m->text == "plain words");
  auto garbage = temp_file("{not json");
  CHECK_FALSE(read_error_file(garbage));
  unlink(garbage.c_str());
  CHECK_FALSE(read_error_file("/nonexistent/error.json"));
  CHECK_FALSE(read_error_file(""));
}

TEST_CASE("summary names the root cause, its signal and stderr tail") {
  Failure root{1, 5, 4242, 0, SIGSEGV, std::chrono::system_clock::now(), "", {"last words"}, "", ""};
  Failure other{0, 4, 4241, 2, 0, std::chrono::system_clock::now(), "", {}, "", ""};
  auto s = format_summary("train", "node-a", {root, other});
  CHECK(s.find("train FAILED") != std::string::npos);
  CHECK(s.find("rank      : 5 (local_rank: 1)") != std::string::npos);
  CHECK(s.find("exitcode  : -11 (SIGSEGV) (pid: 4242)") != std::string::npos);
  CHECK(s.find("Signal 11 (SIGSEGV) received by PID 4242") != std::string::npos);
  CHECK(s.find("    last words") != std::string::npos);
  CHECK(s.find("host      : node-a") != std::string::npos);
  CHECK(s.find("<NO_OTHER_FAILURES>") == std::string::npos);
  CHECK(s.find("Root Cause (first observed failure)") > s.find("rank      : 4"));
  auto single = format_summary("train", "h", {root});
  CHECK(single.find("<NO_OTHER_FAILURES>") != std::string::npos);
}

TEST_CASE("summary of a hang that names no rank says no root cause could be named, with the groups") {
  Failure killed{0, 0, 4242, 0, SIGKILL, std::chrono::system_clock::now(), "", {}, "", ""};
  killed.killed_by = Killer::hang;
  killed.kill_reason = "no worker made progress; no rank stands apart; rank 0 was killed only to stop the job, "
                       "not as its cause";
  killed.no_root_cause = {"no rank stands apart", "ranks 0, 1 wait in all_reduce at w.py:9",
                          "ranks 2, 3 wait in barrier at w.py:11"};
  const std::string s = format_summary("train", "node-a", {killed});
  const size_t heading = s.find("Root Cause (none could be named: no rank stands apart):\n");
  REQUIRE(heading != std::string::npos);
  CHECK(s.find("Root Cause (first observed failure)") == std::string::npos);
  const size_t groups = s.find("\n  ranks 0, 1 wait in all_reduce at w.py:9\n  ranks 2, 3 wait in barrier at w.py:11\n");
  CHECK(groups > heading);
  const size_t first = s.find("First observed failure (rank 0, killed only to stop the job, not as its cause):\n[0]:");
  CHECK(first > groups);
  CHECK(s.find("rank      : 0 (local_rank: 0)") > first);
  // It travels with the failure to the other nodes.
  const auto back = from_record(to_record(killed, "node-a"));
  REQUIRE(back);
  CHECK(back->no_root_cause == killed.no_root_cause);
  // Another failure, later or from another node, goes first: it may be the cause.
  Failure blamed{1, 5, 4250, 0, SIGKILL, killed.time + std::chrono::milliseconds(300), "", {}, "node-b", ""};
  blamed.killed_by = Killer::hang;
  blamed.kill_reason = "no worker made progress; rank 5 stands apart";
  std::vector<Failure> both{killed, blamed};
  order_by_time(both);
  CHECK(both[0].rank == 5);
  CHECK(format_summary("train", "node-a", both).find("Root Cause (first observed failure):") != std::string::npos);
  // A rank blamed as the cause keeps torch's heading.
  killed.no_root_cause.clear();
  CHECK(format_summary("train", "node-a", {killed}).find("Root Cause (first observed failure):\n[0]:") !=
        std::string::npos);
}

TEST_CASE("failures are ordered by when their error files were written") {
  // torch's whole-second timestamps tie; the files' own times do not.
  const std::string same_second =
      R"({"message": {"message": "m", "extraInfo": {"py_callstack": "x", "timestamp": "1795361529"}}})";
  auto early = temp_file(same_second);
  usleep(20'000);
  auto late = temp_file(same_second);
  const auto now = std::chrono::system_clock::now();
  Failure victim{0, 0, 100, 1, 0, now, late, {}, "", ""};
  Failure cause{1, 1, 101, 0, SIGTERM, now + std::chrono::seconds(1), early, {}, "", ""};
  Failure no_file{2, 2, 102, 1, 0, now - std::chrono::hours(1), "/nonexistent/error.json", {}, "", ""};
  std::vector<Failure> failures{victim, cause, no_file};
  order_by_time(failures);
  CHECK(failures[0].rank == 2);  // no file: when the agent saw it
  CHECK(failures[1].rank == 1);
  CHECK(failures[2].rank == 0);
  unlink(early.c_str());
  unlink(late.c_str());
}

TEST_CASE("a failure the agent stopped gives no exit code of its own") {
  Failure stopped{1, 1, 101, 0, SIGTERM, {}, "", {}, "", "", true};
  Failure own{0, 0, 100, 3, 0, {}, "", {}, "", ""};
  CHECK(failure_exit_code({stopped, own}) == 3);
  CHECK(failure_exit_code({own, stopped}) == 3);
  CHECK(failure_exit_code({stopped}) == 1);
  auto s = format_summary("train", "h", {stopped, own});
  CHECK(s.find("exitcode  : -15 (SIGTERM from cxxrun, after this failure) (pid: 101)") != std::string::npos);
  CHECK(describe(stopped).find("had failed (its error file is written) and was stopped with SIGTERM") !=
        std::string::npos);
}

TEST_CASE("a failure record keeps the failure's precise time and whether it was stopped") {
  auto path = temp_file(R"({"message": {"message": "boom", "extraInfo": {"timestamp_ns": 1795361529123456789}}})");
  Failure f{1, 5, 4242, 0, SIGTERM, std::chrono::system_clock::now(), path, {}, "", "", true};
  auto back = from_record(to_record(f, "node-a"));
  unlink(path.c_str());
  REQUIRE(back);
  CHECK(back->stopped);
  CHECK(back->message == "boom");
  CHECK(back->host == "node-a");
  CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(failure_time(*back).time_since_epoch()).count() ==
        1795361529123456789LL);
}

TEST_CASE("the job's failures: published records and this node's own, each once, root cause first") {
  using std::chrono::system_clock;
  const auto t0 = system_clock::now();
  Failure here{0, 0, 100, 3, 0, t0 + std::chrono::seconds(2), "", {}, "", ""};
  Failure remote{1, 5, 200, 7, 0, t0 + std::chrono::seconds(1), "", {}, "node-b", "boom"};
  Failure unpublished{1, 1, 101, 0, SIGSEGV, t0 + std::chrono::seconds(3), "", {}, "", ""};
  const std::vector<std::string> records = {to_record(here, "node-a"), to_record(remote, "node-b"), "not json"};
  auto all = job_failures(records, {here, unpublished}, "node-a");
  REQUIRE(all.size() == 3);
  CHECK(all[0].pid == 200);  // the earliest, from another node
  CHECK(all[1].pid == 100);  // published and local: listed once
  CHECK(all[1].host == "node-a");
  CHECK(all[2].pid == 101);  // local only
  CHECK(failure_exit_code(all) == 7);
  CHECK(job_failures({}, {}, "node-a").empty());
}

TEST_CASE("a worker that was never started has no pid to show") {
  // What WorkerGroup records when exec fails: pid 0, exit code 127.
  Failure never{1, 1, 0, 127, 0, std::chrono::system_clock::now(), "", {"cannot execute"}, "", ""};
  auto s = format_summary("train", "h", {never});
  CHECK(s.find("exitcode  : 127 (pid: not started)") != std::string::npos);
  CHECK(s.find("pid: 0") == std::string::npos);
  CHECK(describe(never) == "rank 1 (local_rank 1, not started) exited with code 127");
  CHECK(describe(Failure{1, 1, 42, 3, 0, {}, "", {}, "", ""}) == "rank 1 (local_rank 1, pid 42) exited with code 3");
  // The record other nodes read keeps a number, and reads back the same way.
  auto record = nlohmann::json::parse(to_record(never, "node-a"));
  CHECK(record["pid"].is_number_integer());
  CHECK(record["pid"] == 0);
  auto back = from_record(to_record(never, "node-a"));
  REQUIRE(back);
  CHECK(format_summary("train", "h", {*back}).find("(pid: not started)") != std::string::npos);
}
