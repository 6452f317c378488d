// The cause of every ended worker (agent/forensics/death.h): one case per cause, what
// wins over what, the line the summary shows, that a record carries it to
// other nodes, and where a core file went (agent/forensics/postmortem.h).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "agent/forensics/death.h"
#include "agent/forensics/failure.h"
#include "agent/forensics/postmortem.h"
#include "agent/forensics/summary.h"

using namespace cxxrun::agent;

namespace {

Failure ended(int wait_status) {
  Failure f;
  f.pid = 42;
  f.rank = 1;
  f.local_rank = 1;
  set_status(f, wait_status);
  return f;
}

Failure killed(int sig) { return ended(W_EXITCODE(0, sig)); }
Failure exited(int code) { return ended(W_EXITCODE(code, 0)); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("death: every cause has its name") {
  CHECK(cause_of(exited(3)) == Death::exited);
  CHECK(explain(exited(3)) == "exited 3");

  Failure traceback = exited(1);
  traceback.stderr_tail = {"Traceback (most recent call last):", "  File \"w.py\", line 1", "ValueError: x"};
  CHECK(cause_of(traceback) == Death::exception);
  CHECK(explain(traceback) == "exception: a Python traceback on stderr");

  Failure remote = exited(1);
  remote.message = "ValueError: boom";  // another node's error file
  CHECK(cause_of(remote) == Death::exception);

  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) CHECK(cause_of(killed(sig)) == Death::crashed);
  CHECK(cause_of(killed(SIGTERM)) == Death::killed_by_signal);
  CHECK(cause_of(killed(SIGKILL)) == Death::killed_by_signal);

  Failure never = exited(127);
  never.pid = 0;
  CHECK(cause_of(never) == Death::not_started);

  std::set<std::string> names;
  for (Death d : kAllDeaths) names.insert(std::string(death_name(d)));
  CHECK(names == std::set<std::string>{"exited", "exception", "crashed", "killed-by-signal", "killed-by-cxxrun",
                                       "oom-killed", "unkillable", "not-started"});
}

TEST_CASE("death: evidence wins over appearance") {
  // The OOM killer's SIGKILL looks like an admin's; the evidence tells them apart.
  Failure oom = killed(SIGKILL);
  oom.memory.oom_killed = true;
  oom.memory.how_known = "counted by its own memory cgroup";
  oom.memory.limit = 512LL << 20;
  oom.memory.limit_set_on = "/sys/fs/cgroup/memory/job";
  oom.memory.peak = 511LL << 20;
  CHECK(cause_of(oom) == Death::oom_killed);
  CHECK(explain(oom) ==
        "oom-killed: the kernel's OOM killer killed pid 42 (counted by its own memory cgroup); memory limit 512 MiB set "
        "on memory cgroup /sys/fs/cgroup/memory/job; peak 511 MiB charged to its memory cgroup");
  oom.memory.peak_rss = 600LL << 20;
  CHECK(explain(oom).ends_with("; peak 511 MiB charged to its memory cgroup; its own peak RSS 600 MiB"));

  // cxxrun's own kill, whatever the signal and even with an error file.
  Failure hang = killed(SIGKILL);
  hang.killed_by = Killer::hang;
  hang.kill_reason = "local rank 1: no heartbeat for 10.0 s";
  CHECK(cause_of(hang) == Death::killed_by_cxxrun);
  CHECK(explain(hang) == "killed-by-cxxrun: the hang watchdog: local rank 1: no heartbeat for 10.0 s; ended by SIGKILL");
  Failure timer = killed(SIGSEGV);  // a file-timer request may name any signal
  timer.killed_by = Killer::file_timer;
  CHECK(cause_of(timer) == Death::killed_by_cxxrun);

  // An unkillable worker is that above all.
  Failure stuck = killed(SIGKILL);
  stuck.killed_by = Killer::grace;
  stuck.unkillable = true;
  stuck.wait_state = "state D (uninterruptible sleep), waiting in nfs_wait_bit_killable";
  CHECK(cause_of(stuck) == Death::unkillable);
  CHECK(contains(explain(stuck), "nfs_wait_bit_killable"));
}

TEST_CASE("death: a SIGKILL nobody in cxxrun sent says what the memory evidence can and cannot tell") {
  Failure own = killed(SIGKILL);
  own.memory.cgroup = "/m/rank-1";
  own.memory.limit = 0;
  CHECK(explain(own) ==
        "killed-by-signal: SIGKILL, not sent by cxxrun; the OOM killer did not kill it (no memory limit on its cgroups "
        "(/m/rank-1))");
  Failure machine = killed(SIGKILL);
  machine.memory.oom_killed = true;
  machine.memory.limit = 0;
  CHECK(explain(machine).starts_with("oom-killed: the kernel's OOM killer killed pid 42; the machine ran out of memory"));

  Failure shared = killed(SIGKILL);
  shared.memory.cgroup = "/m/job";
  shared.memory.shared_oom_kills = 1;
  shared.memory.missing = "the kernel log (/dev/kmsg) is not readable";
  CHECK(cause_of(shared) == Death::killed_by_signal);  // never guessed
  CHECK(contains(explain(shared), "memory cgroup /m/job counted 1 OOM kill while it ran, but other processes share it"));
  CHECK(contains(explain(shared), "not readable"));

  Failure unknown = killed(SIGKILL);
  unknown.memory.missing = "no memory cgroup controller is mounted";
  CHECK(contains(explain(unknown), "whether the OOM killer sent it is not known: no memory cgroup controller"));
}

TEST_CASE("death: a crash names the kernel's fault line and the core file") {
  Failure segv = ended(W_EXITCODE(0, SIGSEGV) | 0x80);
  segv.fault = "kernel: train[42]: segfault at 0 ip 00005555 sp 00007ffc error 4 in train[1000,5555+2000]";
  segv.core_dumped = true;
  segv.core = "to /work/core.42";
  CHECK(explain(segv) ==
        "crashed: SIGSEGV; kernel: train[42]: segfault at 0 ip 00005555 sp 00007ffc error 4 in train[1000,5555+2000]; "
        "core dumped to /work/core.42");
  Failure abort = killed(SIGABRT);
  abort.core = "no core file: the core size limit is 0 (ulimit -c)";
  CHECK(explain(abort) == "crashed: SIGABRT; no core file: the core size limit is 0 (ulimit -c)");
}

TEST_CASE("death: cxxrun's kills read as such in the summary") {
  Failure grace = killed(SIGKILL);
  grace.stopped = true;
  grace.killed_by = Killer::grace;
  grace.kill_reason = "it did not stop within the 1000 ms shutdown grace";
  const std::string s = format_summary("train", "h", {exited(3), grace});
  CHECK(contains(s, "exitcode  : -9 (SIGKILL from cxxrun, after the shutdown grace)"));
  CHECK(contains(s, "cause     : killed-by-cxxrun: the shutdown grace: it did not stop within the 1000 ms shutdown grace"));
  CHECK(contains(s, "cause     : exited 3"));

  Failure injected = killed(SIGKILL);
  injected.killed_by = Killer::fault_injection;
  injected.kill_reason = "--inject-fault sent SIGKILL";
  CHECK(explain(injected) == "killed-by-cxxrun: fault injection: --inject-fault sent SIGKILL; ended by SIGKILL");
}

TEST_CASE("death: a failure record carries its cause to the other nodes") {
  Failure f = killed(SIGKILL);
  f.memory.oom_killed = true;
  f.memory.how_known = "named in the kernel log";
  f.memory.kernel_line = "Memory cgroup out of memory: Killed process 42 (python3)";
  f.memory.limit = 1 << 30;
  f.memory.peak = 1 << 29;
  f.memory.limit_set_on = "/m/job";
  f.memory.child_oom_kills = 2;
  f.killed_by = Killer::file_timer;
  f.kill_reason = "scope 'step' expired";
  f.fault = "kernel: x";
  f.core_dumped = true;
  f.core = "to /core";
  f.unkillable = true;
  f.wait_state = "state D";
  auto back = from_record(to_record(f, "node-a"));
  REQUIRE(back);
  CHECK(back->host == "node-a");
  CHECK(explain(*back) == explain(f));
  CHECK(back->memory.kernel_line == f.memory.kernel_line);
  CHECK(back->memory.child_oom_kills == 2);
  CHECK(back->killed_by == Killer::file_timer);
  CHECK(back->core == "to /core");
  // A record from an older agent: no cause fields, no guess.
  auto old = from_record(R"({"host":"b","rank":3,"pid":7,"exit_code":0,"signal":9})");
  REQUIRE(old);
  CHECK(cause_of(*old) == Death::killed_by_signal);
  CHECK(killer_from_id("no-such-killer") == Killer::none);
}

TEST_CASE("postmortem: where a core file went, from kernel.core_pattern") {
  CHECK(core_text(false, "core", 42, "train", "/w", 0) == "no core file: the core size limit is 0 (ulimit -c)");
  CHECK(core_text(false, "core", 42, "train", "/w", -1).empty());
  CHECK(core_text(true, "/var/crash/core.%e.%p", 42, "train", "/w", -1) == "to /var/crash/core.train.42");
  CHECK(core_text(true, "|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h", 42, "train", "/w", -1) ==
        "piped to /usr/lib/systemd/systemd-coredump (coredumpctl info 42)");
  CHECK(core_text(true, "|/usr/share/apport/apport -p%p", 42, "t", "/w", -1) == "piped to /usr/share/apport/apport");
  CHECK(core_text(true, "/cores/%h-%t", 42, "t", "/w", -1) == "to kernel.core_pattern /cores/%h-%t");
  std::ifstream uses_pid("/proc/sys/kernel/core_uses_pid");
  std::string v;
  std::getline(uses_pid, v);
  CHECK(core_text(true, "core", 42, "t", "/w", -1) == (v == "1" ? "to /w/core.42" : "to /w/core"));
}
