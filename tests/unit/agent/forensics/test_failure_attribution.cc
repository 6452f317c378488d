// Which rank is blamed and what it is blamed for (agent/forensics/failure.h,
// agent/forensics/python_traceback.h, agent/forensics/death.h): a communication error is never
// the root cause while the failure it followed lands within the window; a
// long traceback keeps its exception and the user's innermost frame; a
// crash in a side thread shows that thread; the fault line says why it is
// missing; a data loader's OOM is an OOM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "agent/forensics/death.h"
#include "agent/forensics/failure.h"
#include "agent/forensics/library_file.h"
#include "agent/workers/output.h"
#include "agent/forensics/postmortem.h"
#include "agent/forensics/python_traceback.h"
#include "agent/restart_policy.h"
#include "agent/forensics/summary.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

bool contains_text(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// What Python 3.11 prints for a shape error raised inside torch: more than
// ten lines, with the position markers.
const std::string kTorchShapeError = R"(Traceback (most recent call last):
  File "/job/train.py", line 10, in <module>
    main()
  File "/job/train.py", line 9, in main
    train()
  File "/job/train.py", line 7, in train
    out = forward(model, x)
          ^^^^^^^^^^^^^^^^^
  File "/job/train.py", line 3, in forward
    return model(x)
           ^^^^^^^^
  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1194, in _call_impl
    return forward_call(*input, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", line 114, in forward
    return F.linear(input, self.weight, self.bias)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and 20x4)
)";

// faulthandler for a segfault in a side thread: the crashing thread first,
// the main thread (waiting in join) last.
const std::string kSideThreadCrash = R"(Fatal Python error: Segmentation fault

Current thread 0x00007fe5aa6096c0 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/job/seg.py", line 4 in crash
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Thread 0x00007fe5aa9012c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 1132 in _wait_for_tstate_lock
  File "/usr/lib/python3.11/threading.py", line 1112 in join
  File "/job/seg.py", line 7 in <module>
)";

// What a worker's stderr sink keeps of `text`, as the worker group reads it.
Failure through_sink(const std::string& text, int wait_status) {
  StreamSink sink("[w]:", -1, "", 10);
  sink.write(text);
  sink.finish();
  Failure f;
  f.pid = 42;
  set_status(f, wait_status);
  f.stderr_tail.assign(sink.tail().begin(), sink.tail().end());
  f.traceback = sink.last_traceback().text();
  return f;
}

Failure with_time(int rank, std::chrono::system_clock::time_point t, const std::string& last_line) {
  Failure f;
  f.rank = f.local_rank = rank;
  f.pid = 100 + rank;
  f.exit_code = 1;
  f.time = t;
  f.stderr_tail = {last_line};
  return f;
}

}  // namespace

TEST_CASE("root cause: a communication error that follows a peer's failure is not the root, even reaped first") {
  const auto t = std::chrono::system_clock::now();
  const std::string closed = "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:6050";
  std::vector<Failure> failures{with_time(0, t, closed), with_time(1, t + 30ms, closed),
                                with_time(3, t + 400ms, "ValueError: rank 3 diverged at step 3"),
                                with_time(2, t + 50ms, "RuntimeError: Connection reset by peer")};
  REQUIRE(communication_error(failures[0]));
  REQUIRE_FALSE(communication_error(failures[2]));
  order_by_time(failures);
  CHECK(failures[0].rank == 3);
  CHECK(failures[1].rank == 0);  // the rest keep their order in time
  CHECK(failures[2].rank == 1);
  CHECK(failures[3].rank == 2);
  CHECK(failure_exit_code(failures) == 1);

  SECTION("a failure beyond the window is not what the error followed") {
    std::vector<Failure> late{with_time(0, t, closed), with_time(3, t + kConsequenceWindow + 1s, "ValueError: x")};
    order_by_time(late);
    CHECK(late[0].rank == 0);
  }
  SECTION("with only communication errors, the first is the root") {
    std::vector<Failure> all{with_time(1, t + 10ms, closed), with_time(0, t, closed)};
    order_by_time(all);
    CHECK(all[0].rank == 0);
  }
  SECTION("a record from another node carries what classifies it") {
    Failure remote = *from_record(to_record(failures[1], "node-b"));
    CHECK(communication_error(remote));
  }
  SECTION("another node's records: all communication errors, or not") {
    const std::string closed0 = to_record(with_time(0, t, closed), "node-b");
    const std::string reset2 = to_record(with_time(2, t, "RuntimeError: Connection reset by peer"), "node-b");
    CHECK(only_communication_errors({closed0, reset2}));
    CHECK_FALSE(only_communication_errors({closed0, to_record(with_time(3, t, "ValueError: x"), "node-b")}));
    CHECK_FALSE(only_communication_errors({}));
    CHECK_FALSE(only_communication_errors({closed0, "not a record"}));
  }
}

TEST_CASE("root cause: a rank killed on a hang verdict goes before the peers that fail as it ends") {
  // Rank 2 was stopped (SIGSTOP) and killed by the hang watchdog; rank 3
  // began a traceback as rank 2's sockets closed, a moment before rank 2's
  // end was reaped, and the group's stop then ended it mid-traceback (no
  // message: nothing marks it as a communication error).
  const auto t = std::chrono::system_clock::now();
  Failure hung = with_time(2, t + 40ms, "");
  hung.exit_code = 0;
  hung.signal = SIGKILL;
  hung.killed_by = Killer::hang;
  hung.kill_reason = "rank 2 was stopped by a signal";
  Failure peer = with_time(3, t + 60ms, "  File \"/job/w.py\", line 42, in <module>");
  peer.traceback = "Traceback (most recent call last):\n  File \"/job/w.py\", line 42, in <module>\n";
  peer.traceback_time = t;
  std::vector<Failure> failures{peer, hung};
  REQUIRE(failure_time(peer) < failure_time(hung));
  order_by_time(failures);
  CHECK(failures[0].rank == 2);
  CHECK(failures[1].rank == 3);

  SECTION("a failure well before the verdict's kill stays first") {
    Failure early = with_time(1, t - kConsequenceWindow - 1s, "ValueError: x");
    std::vector<Failure> two{hung, early};
    order_by_time(two);
    CHECK(two[0].rank == 1);
  }
  SECTION("the group's own stop is not a verdict") {
    Failure graced = hung;
    graced.killed_by = Killer::grace;
    std::vector<Failure> two{peer, graced};
    order_by_time(two);
    CHECK(two[0].rank == 3);
  }
}

TEST_CASE("root cause: a traceback printed just before the end dates the failure; an old caught one does not") {
  const auto t = std::chrono::system_clock::now();
  Failure f = with_time(0, t, "x");
  f.traceback = "Traceback (most recent call last):\nValueError: x";
  f.traceback_time = t - 300ms;
  CHECK(failure_time(f) == t - 300ms);
  f.traceback_time = t - 1h;  // caught and logged long ago; the program went on
  CHECK(failure_time(f) == t);
}

TEST_CASE("traceback: a long Python 3.11 traceback keeps its exception and the user's innermost frame") {
  Failure f = through_sink(kTorchShapeError, W_EXITCODE(1, 0));
  REQUIRE(f.stderr_tail.size() == 10);  // the header is long gone from the tail
  CHECK(f.traceback == kTorchShapeError.substr(0, kTorchShapeError.size() - 1));
  CHECK(cause_of(f) == Death::exception);
  CHECK(explain(f) ==
        "exception: a Python traceback on stderr: RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and "
        "20x4); in its own code at /job/train.py:3 in forward: return model(x)");
  const std::string summary = format_summary("train", "h", {f});
  CHECK(contains_text(summary, "traceback : Traceback (most recent call last):\n    File \"/job/train.py\", line 10"));
}

TEST_CASE("traceback: an error file's call stack names the exception and the user's frame") {
  char path[] = "/tmp/cxxrun_err_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream out(path);
    out << R"({"message": {"message": "ValueError: rank 3 diverged at step 3", "extraInfo": {"py_callstack": )"
        << R"("Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 346, in wrapper\n    return f(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^\n  File \"/job/t.py\", line 18, in main\n    train()\n  File \"/job/t.py\", line 12, in train\n    raise ValueError(f\"rank {rank} diverged at step {step}\")\nValueError: rank 3 diverged at step 3\n", "timestamp": "1795756266"}}})";
  }
  Failure f;
  f.pid = 42;
  f.exit_code = 1;
  f.error_file = path;
  CHECK(explain(f) ==
        "exception: its error file: ValueError: rank 3 diverged at step 3; in its own code at /job/t.py:12 in train: "
        "raise ValueError(f\"rank {rank} diverged at step {step}\")");
  unlink(path);
}

TEST_CASE("traceback: a native program's error message is shown as it is") {
  Failure f;
  f.pid = 42;
  f.exit_code = 1;
  f.message = "rank 1 failed on purpose (--fail-rank)";
  f.host = "other";
  CHECK(failure_message(f) == "rank 1 failed on purpose (--fail-rank)");
}

TEST_CASE("traceback: the capture keeps the last one whole, within its bound") {
  TracebackCapture c;
  const auto now = std::chrono::system_clock::now();
  c.line("Traceback (most recent call last):", now);
  c.line("  File \"/a.py\", line 1, in <module>", now);
  c.line("KeyError: 'x'", now);
  c.line("", now);
  c.line("During handling of the above exception, another exception occurred:", now);
  c.line("", now);
  c.line("Traceback (most recent call last):", now + 1s);
  c.line("  File \"/a.py\", line 3, in <module>", now + 1s);
  c.line("RuntimeError: y", now + 1s);
  c.line("epoch 3 loss 0.5", now + 2s);  // a caught one, and the program went on
  CHECK(c.text() == "Traceback (most recent call last):\n  File \"/a.py\", line 3, in <module>\nRuntimeError: y");
  CHECK(c.since() == now + 1s);

  TracebackCapture deep;
  deep.line("Traceback (most recent call last):", now);
  for (int i = 0; i < 5000; ++i) deep.line("  File \"/r.py\", line 2, in recurse", now);
  deep.line("RecursionError: maximum recursion depth exceeded", now);
  const std::string text = deep.text();
  CHECK(text.size() <= TracebackCapture::kMaxBytes + 100);
  CHECK(text.starts_with("Traceback (most recent call last):\n  ... ("));
  CHECK(text.ends_with("RecursionError: maximum recursion depth exceeded"));
  CHECK(parse_traceback(text)->exception == "RecursionError: maximum recursion depth exceeded");
}

TEST_CASE("traceback: a segfault in a side thread shows the thread that crashed") {
  Failure f = through_sink(kSideThreadCrash, W_EXITCODE(0, SIGSEGV));
  CHECK(cause_of(f) == Death::crashed);
  const std::string summary = format_summary("train", "h", {f});
  CHECK(contains_text(summary, "traceback : Fatal Python error: Segmentation fault\n  \n  Current thread 0x00007fe5aa6096c0"));
  CHECK(contains_text(summary, "File \"/job/seg.py\", line 4 in crash"));
  CHECK(contains_text(summary, "(1 other thread not shown)"));
  const auto at = summary.find("traceback : ");
  CHECK(summary.find("_wait_for_tstate_lock", at) > summary.find("  stderr (last", at));  // only in the raw tail
  CHECK(contains_text(explain(f), "crashed: SIGSEGV; faulthandler: the thread that crashed was in its own code at "
                             "/job/seg.py:4 in crash"));
  const auto tb = parse_traceback(f.traceback);
  REQUIRE(tb);
  CHECK(tb->other_threads == 1);
  CHECK(innermost_user_frame(*tb)->function == "crash");
}

TEST_CASE("traceback: library files are told from the user's") {
  CHECK(python_library_file("/usr/lib/python3/dist-packages/torch/nn/functional.py"));
  CHECK(python_library_file("/venv/lib/python3.11/site-packages/numpy/core.py"));
  CHECK(python_library_file("/usr/lib/python3.11/threading.py"));
  CHECK(python_library_file("<frozen importlib._bootstrap>"));
  CHECK_FALSE(python_library_file("/home/me/train.py"));
  CHECK_FALSE(python_library_file("<string>"));
}

TEST_CASE("peak RSS: wait4's peak of a worker that reaped children is not called its own") {
  Failure f;
  f.pid = 42;
  f.signal = SIGKILL;
  f.memory.peak_rss = 600LL << 20;
  CHECK(contains_text(explain(f), "its own peak RSS 600 MiB"));
  f.memory.peak_rss_of_children = true;
  CHECK_FALSE(contains_text(explain(f), "its own peak RSS"));
  CHECK(contains_text(explain(f), "peak RSS 600 MiB of it or one of the child processes it reaped"));
  CHECK(from_record(to_record(f, "h"))->memory.peak_rss_of_children);
}

TEST_CASE("exit code: a rank that fails after the OOM killer killed its child is an OOM") {
  Failure loader;
  loader.pid = 42;
  loader.exit_code = 1;
  loader.memory.child_oom_kills = 1;
  CHECK(failure_exit_code({loader}) == exit_code::oom);
  CHECK(contains_text(explain(loader), "the OOM killer killed 1 of its child processes"));
  Failure plain = loader;
  plain.memory.child_oom_kills = 0;
  CHECK(failure_exit_code({plain}) == 1);
}

TEST_CASE("fault line: a fault faulthandler caught says so, not that another thread faulted") {
  Failure main_thread = through_sink(
      "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f0000000001 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at\n  File \"/job/seg.py\", line 1 in "
      "<module>\n",
      W_EXITCODE(0, SIGSEGV));
  const std::string text = missing_fault_line(main_thread);
  CHECK(text == "fault address unknown: Python's faulthandler caught the SIGSEGV and raised it again, so the kernel "
                "logged no fault line");
  Failure native;
  native.pid = 42;
  native.signal = SIGSEGV;
  CHECK_FALSE(contains_text(missing_fault_line(native), "faulthandler"));
  CHECK(contains_text(missing_fault_line(native), "no kernel fault line for pid 42"));
}

TEST_CASE("peak RSS: a worker's own peak read while it ran is said beside wait4's") {
  Failure f;
  f.pid = 42;
  f.signal = SIGKILL;
  f.memory.peak_rss = 400LL << 20;
  f.memory.peak_rss_of_children = true;
  f.memory.own_peak_at_least = 30LL << 20;
  CHECK(contains_text(explain(f), "peak RSS 400 MiB of it or one of the child processes it reaped (wait4 does not tell "
                             "which); its own peak RSS at least 30 MiB (read while it ran)"));
}

TEST_CASE("peak RSS: an ended worker's /proc says whether it had reaped children") {
  auto ended_child = [](bool reaps) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (reaps) {
        const pid_t grandchild = fork();
        if (grandchild == 0) _exit(0);
        waitpid(grandchild, nullptr, 0);
      }
      _exit(1);
    }
    siginfo_t info{};
    REQUIRE(waitid(P_PID, pid, &info, WEXITED | WNOWAIT) == 0);  // a zombie, not reaped
    const bool had = had_reaped_children(pid);
    waitpid(pid, nullptr, 0);
    return had;
  };
  CHECK(ended_child(true));
  CHECK_FALSE(ended_child(false));
}

TEST_CASE("postmortem: a stat file whose read fails (the process reaped meanwhile) is no children, not a crash") {
  // What libstdc++'s filebuf does when read(2) on /proc/<pid>/stat fails
  // with ESRCH: it throws from underflow. The agent died of it once
  // ("basic_filebuf::underflow error reading the file: No such process").
  struct Reaped : std::streambuf {
    int_type underflow() override { throw std::ios_base::failure("basic_filebuf::underflow error reading the file"); }
  } reaped;
  std::istream stat(&reaped);
  bool had = true;
  CHECK_NOTHROW(had = had_reaped_children(stat));
  CHECK_FALSE(had);
}
