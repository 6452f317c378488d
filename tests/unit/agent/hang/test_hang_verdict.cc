// --hang-timeout's rule (agent/hang/progress_monitor.h) and naming the rank that
// stands apart from every rank's stack (agent/hang/culprit.h), on recorded dumps.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "agent/forensics/library_file.h"
#include "agent/hang/culprit.h"
#include "agent/hang/progress_monitor.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

// What Python's faulthandler writes for a rank waiting in all_reduce called
// from line 61 of w.py, with a side thread that beats.
std::string in_all_reduce() {
  return "Thread 0x00007f1c9b7fe640 (most recent call first):\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
         "  File \"/work/w.py\", line 12 in beat\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
         "\n"
         "Current thread 0x00007f1ca3a5c740 (most recent call first):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 in all_reduce\n"
         "  File \"/work/w.py\", line 61 in <module>\n";
}

// A rank blocked on a lock inside its own function `wedge` (line 78).
std::string in_wedge() {
  return "Thread 0x00007f1c9b7fe640 (most recent call first):\n"
         "  File \"/work/w.py\", line 12 in beat\n"
         "\n"
         "Thread 0x00007f1ca3a5c740 (most recent call first):\n"
         "  File \"/work/w.py\", line 78 in wedge\n"
         "  File \"/work/w.py\", line 60 in <module>\n";
}

std::string native_wedge() {
  return "PID 8112 - process\n"
         "TID 8113:\n"
         "#0  0x00007fc49658212b clock_nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
         "TID 8112:\n"
         "#0  0x00007fc49658212b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
         "    ../sysdeps/nptl/futex-internal.h:146:13\n"
         "#1  0x00007fc496588482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
         "    ./nptl/pthread_mutex_lock.c:48:5\n"
         "#2  0x000055faf061215b wedge - /tmp/wnative\n"
         "    /tmp/w.c:4:44\n"
         "#3  0x000055faf0612167 main - /tmp/wnative\n"
         "    /tmp/w.c:5:18\n";
}

}  // namespace

TEST_CASE("culprit: where a rank waits is its main thread's innermost frame of the user's") {
  CHECK(where_it_waits(main_thread_frames(in_all_reduce())) == "all_reduce at w.py:61");
  CHECK(where_it_waits(main_thread_frames(in_wedge())) == "wedge at w.py:78");
  CHECK(where_it_waits(main_thread_frames(native_wedge())) == "__pthread_mutex_lock at w.c:4");
  CHECK(main_thread_frames("no stack here").empty());
  CHECK(where_it_waits({}).empty());
  CHECK(library_file("/usr/lib/python3.11/threading.py"));
  CHECK(library_file("/home/u/venv/lib/python3.11/site-packages/torch/nn.py"));
  CHECK_FALSE(library_file("/work/w.py"));
}

TEST_CASE("culprit: the rank that stands apart is named, whatever tick its peers were flagged in") {
  const HangPicture p = picture({{0, in_all_reduce()}, {1, in_all_reduce()}, {2, in_all_reduce()}, {3, in_wedge()}});
  CHECK(p.line == "ranks 0\u20132 wait in all_reduce at w.py:61; rank 3 waits in wedge at w.py:78");
  REQUIRE(p.apart);
  CHECK(*p.apart == 3);

  const HangPicture first = picture({{0, in_wedge()}, {1, in_all_reduce()}, {2, in_all_reduce()}});
  CHECK(*first.apart == 0);
  CHECK(first.line == "rank 0 waits in wedge at w.py:78; ranks 1, 2 wait in all_reduce at w.py:61");
}

TEST_CASE("culprit: ranks without a stack are said so; all alike, nobody stands apart") {
  const HangPicture p = picture({{0, in_all_reduce()}, {1, ""}, {2, in_all_reduce()}});
  CHECK(p.line == "ranks 0, 2 wait in all_reduce at w.py:61; rank 1: no stack");
  CHECK_FALSE(p.apart);  // all alike: nobody stands apart
  const HangPicture none = picture({{0, ""}, {1, ""}});
  CHECK_FALSE(none.apart);
  CHECK(none.line == "ranks 0, 1: no stack");
  CHECK(rank_list({4, 5, 6, 7}) == "4\u20137");
  CHECK(rank_list({1, 3}) == "1, 3");
}

TEST_CASE("progress: hung when no worker made progress for the timeout, by CPU, output or beats") {
  using Clock = ProgressMonitor::Clock;
  const Clock::time_point t0 = Clock::now();
  ProgressMonitor m(10s);
  m.reset(t0);
  ProgressMonitor::Sample idle{1s, 100, 0};
  for (int rank : {0, 1}) m.observe(rank, idle, t0 + 1s);
  CHECK_FALSE(m.check(t0 + 9s));
  // A trickle of CPU (a timer thread), counted in the kernel's 10 ms ticks,
  // is idling, not progress.
  ProgressMonitor::Sample trickle{1s + 10ms, 100, 0};
  m.observe(0, trickle, t0 + 5s);
  m.observe(1, ProgressMonitor::Sample{1s + 20ms, 100, 0}, t0 + 7s);
  REQUIRE(m.check(t0 + 10s));
  CHECK(m.check(t0 + 12s)->idle == 12s);

  // Any one worker moving keeps the job alive: CPU, output or a beat.
  for (auto moved : {ProgressMonitor::Sample{2s, 100, 0}, ProgressMonitor::Sample{1s + 2ms, 101, 0},
                     ProgressMonitor::Sample{1s + 2ms, 100, 1}}) {
    ProgressMonitor fresh(10s);
    fresh.reset(t0);
    fresh.observe(0, trickle, t0 + 1s);
    fresh.observe(1, idle, t0 + 1s);
    fresh.observe(0, moved, t0 + 8s);
    CHECK_FALSE(fresh.check(t0 + 12s));
    CHECK(fresh.check(t0 + 18s));
  }
}

TEST_CASE("progress: an ended worker speaks no more; no workers, no verdict; 0 is off") {
  using Clock = ProgressMonitor::Clock;
  const Clock::time_point t0 = Clock::now();
  ProgressMonitor m(5s);
  m.reset(t0);
  CHECK_FALSE(m.check(t0 + 60s));
  m.observe(0, {}, t0);
  m.forget(0);
  CHECK_FALSE(m.check(t0 + 60s));
  ProgressMonitor off(0s);
  off.reset(t0);
  off.observe(0, {}, t0);
  CHECK_FALSE(off.check(t0 + 60s));
}
