// The kernel's evidence on a worker's death: its log's OOM and fault lines
// (agent/forensics/kernel_log.h), a regular file standing in for /dev/kmsg; the last
// tests do the real thing, with the memory cgroups (agent/forensics/memory_cgroup.h,
// whose fake trees are in test_memory_cgroup.cc), when root on a host with
// the v1 memory controller.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/forensics/kernel_log.h"
#include "agent/forensics/memory_cgroup.h"
#include "temp_tree.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;
using Kind = KernelEvent::Kind;

namespace {

void append(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::app) << text; }

std::string kmsg(const std::string& text, int pri = 6) { return std::to_string(pri) + ",1,2,-;" + text + "\n"; }

const char* const cgroup_oom =
    "Memory cgroup out of memory: Killed process 2821 (alloc) total-vm:264624kB, anon-rss:32512kB, "
    "file-rss:968kB, shmem-rss:0kB, UID:0 pgtables:108kB oom_score_adj:0";
const char* const segfault =
    "python3[25768]: segfault at 0 ip 00007fbada929ad8 sp 00007fff54f7cf28 error 4 in "
    "libc.so.6[167ad8,7fbada7e8000+156000] likely on CPU 1 (core 1, socket 0)";

}  // namespace

TEST_CASE("kernel records: OOM kills, cgroup or global, and what is not a kill", "[kernel-evidence]") {
  auto e = parse_kernel_record(std::string("6,352,10307838837,-;") + cgroup_oom + "\n SUBSYSTEM=x\n");
  REQUIRE(e);
  CHECK(e->kind == Kind::oom_kill);
  CHECK(e->pid == 2821);
  CHECK(e->text == cgroup_oom);
  CHECK(memory_cgroup_oom(*e));

  e = parse_kernel_record(kmsg("Out of memory: Killed process 77 (python3) total-vm:1kB, anon-rss:1kB", 3));
  REQUIRE(e);
  CHECK(e->pid == 77);
  CHECK_FALSE(memory_cgroup_oom(*e));
  CHECK(parse_kernel_record(kmsg("Out of memory (oom_kill_allocating_task): Killed process 5 (x) total-vm:1kB"))->pid == 5);
  CHECK(parse_kernel_record(kmsg("Killed process 123 (x) total-vm:1kB, anon-rss:1kB"))->pid == 123);  // older kernels

  CHECK_FALSE(parse_kernel_record(kmsg("oom_reaper: reaped process 2821 (alloc), now anon-rss:0kB, file-rss:0kB")));
  CHECK_FALSE(parse_kernel_record(kmsg("Memory cgroup out of memory: Kill process 1 (x) score 5 or sacrifice child")));
  CHECK_FALSE(parse_kernel_record(kmsg("watchdog: Killed process 5 (x)")));
  CHECK_FALSE(parse_kernel_record(kmsg("Out of memory: Killed process x (y)")));
  CHECK_FALSE(parse_kernel_record(kmsg(
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,task=alloc,pid=2821,uid=0")));
  // User space may write to /dev/kmsg, but never as the kernel (facility 0).
  CHECK_FALSE(parse_kernel_record(kmsg(cgroup_oom, 14)));
  CHECK_FALSE(parse_kernel_record(cgroup_oom));
}

TEST_CASE("kernel records: fault lines name the faulting thread", "[kernel-evidence]") {
  auto e = parse_kernel_record(kmsg(segfault));
  REQUIRE(e);
  CHECK(e->kind == Kind::fault);
  CHECK(e->pid == 25768);
  CHECK(e->text == segfault);
  CHECK(parse_kernel_record(kmsg("traps: python3[4242] general protection fault ip:7f00 sp:7ffc error:0 in "
                                 "libtorch.so[7f00+1000]"))
            ->pid == 4242);
  CHECK(parse_kernel_record(kmsg("traps: a.out[99] trap divide error ip:401136 sp:7ffc error:0 in a.out[401000+1000]"))
            ->pid == 99);
  CHECK(parse_kernel_record(kmsg("a.out[98] trap invalid opcode ip:401136 sp:7ffc error:0 in a.out[401000+1000]"))->pid ==
        98);
  // comm is the program's to choose, brackets included.
  CHECK(parse_kernel_record(kmsg("my [1] x[314]: segfault at 0 ip 0 sp 0 error 4"))->pid == 314);
  CHECK(parse_kernel_record(kmsg("python3[77]: unhandled level 3 translation fault (11) at 0x0, esr 0x92000046"))->pid ==
        77);
  // kernel.print-fatal-signals: with the pid in 2.6 kernels, without since.
  CHECK(parse_kernel_record(kmsg("python3/555: potentially unexpected fatal signal 11."))->pid == 555);
  CHECK(parse_kernel_record(kmsg("/usr/bin/python3.11: python3: potentially unexpected fatal signal 11."))->pid == 0);
  CHECK(parse_kernel_record(kmsg("potentially unexpected fatal signal 6."))->pid == 0);

  CHECK_FALSE(parse_kernel_record(kmsg("Code: e1 ff ff ff c3 66 2e 0f 1f 84 00 00 00 <62> f3 7d 20")));
  CHECK_FALSE(parse_kernel_record(kmsg("umip: a.out[5] ip:401136 sp:7ffc: SGDT instruction cannot be used")));
  CHECK_FALSE(parse_kernel_record(kmsg("x[5] ip:1 sp:2 error:3")));
  CHECK_FALSE(parse_kernel_record(kmsg("segv[0]: segfault at 0 ip 0 sp 0 error 6")));

  CHECK(register_dump_pid("CPU: 1 UID: 0 PID: 4242 Comm: python3 Not tainted 6.18.4 #1") == 4242);
  CHECK(register_dump_pid("CPU: 0 PID: 17 Comm: x Tainted: G") == 17);
  CHECK_FALSE(register_dump_pid("CPU: 0 UID: 0 PID: Comm: x"));
  CHECK_FALSE(register_dump_pid("RIP: 0033:0x401136"));
}

TEST_CASE("KernelLog: reads from the end, without blocking, what is appended", "[kernel-evidence]") {
  TempDir tmp;
  const std::string path = tmp.path + "/kmsg";
  std::string why;
  CHECK_FALSE(KernelLog::open(why, path));
  CHECK(why == "no " + path + " here (a container without it)");
  CHECK_FALSE(KernelLog::open(why, "/dev/null"));
  CHECK(why == "/dev/null here is not the kernel log (a container's stand-in for it)");

  write_file(path, kmsg("Out of memory: Killed process 1 (old) total-vm:1kB"));
  auto log = KernelLog::open(why, path);
  REQUIRE(log);
  log->poll();
  CHECK_FALSE(log->find(1, Kind::oom_kill));  // before open: not ours

  append(path, kmsg("unrelated") + kmsg(cgroup_oom) + " SUBSYSTEM=memory\n" + kmsg(segfault));
  append(path, std::string("6,9,9,-;Out of memory: Killed pro"));  // half a record
  log->poll();
  REQUIRE(log->find(2821, Kind::oom_kill));
  CHECK(log->find(2821, Kind::oom_kill)->text == cgroup_oom);
  CHECK_FALSE(log->find(2821, Kind::fault));
  CHECK(log->find(25768, Kind::fault)->text == segfault);
  CHECK_FALSE(log->find(31, Kind::oom_kill));
  append(path, "cess 31 (late) total-vm:1kB\n");
  log->poll();
  CHECK(log->find(31, Kind::oom_kill));

  SECTION("a pid-less fatal-signal line takes the pid of the register dump after it") {
    append(path, kmsg("/usr/bin/python3.11: python3: potentially unexpected fatal signal 6.") + kmsg("other CPU's line") +
                     kmsg("CPU: 1 UID: 0 PID: 4242 Comm: python3 Not tainted 6.18.4 #1", 4));
    log->poll();
    REQUIRE(log->find(4242, Kind::fault));
    CHECK(log->find(4242, Kind::fault)->text.find("fatal signal 6") != std::string::npos);
  }
  SECTION("which never hides the fault line before it") {
    append(path, kmsg(segfault) + kmsg("python3/25768: potentially unexpected fatal signal 11."));
    log->poll();
    CHECK(log->find(25768, Kind::fault)->text == segfault);
    CHECK(log->recent(Kind::fault).size() == 3);
  }
  SECTION("forget") {
    log->forget(2821);
    CHECK_FALSE(log->find(2821, Kind::oom_kill));
    CHECK(log->find(25768, Kind::fault));
  }
  CHECK(log->overwritten() == 0);
}

TEST_CASE("KernelLog: bounded per poll and in memory", "[kernel-evidence]") {
  TempDir tmp;
  const std::string path = tmp.path + "/kmsg";
  write_file(path, "");
  std::string why;
  auto log = KernelLog::open(why, path);
  REQUIRE(log);
  std::string records;
  for (int pid = 1; pid <= 10005; ++pid) records += kmsg("Out of memory: Killed process " + std::to_string(pid) + " (x)");
  append(path, records);
  log->poll();  // 10000 records at most
  CHECK(log->find(10000, Kind::oom_kill));
  CHECK_FALSE(log->find(10001, Kind::oom_kill));
  CHECK_FALSE(log->find(10000 - KernelLog::max_events, Kind::oom_kill));  // the oldest went
  CHECK(log->recent(Kind::oom_kill).size() == KernelLog::max_events);
  log->poll();
  CHECK(log->find(10005, Kind::oom_kill));
}

TEST_CASE("KernelLog: /dev/kmsg says why it cannot be read", "[kernel-evidence]") {
  std::string why;
  auto log = KernelLog::open(why);
  if (log) {
    log->poll();  // never blocks: EAGAIN at the end
    SUCCEED("/dev/kmsg is readable here");
  } else {
    CHECK_FALSE(why.empty());
    WARN("/dev/kmsg: " << why);
  }
}


namespace {

// A forked child, killed and reaped however the test ends.
struct Child {
  pid_t pid = -1;
  int status = 0;
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  int wait() {
    REQUIRE(waitpid(pid, &status, 0) == pid);
    pid = -1;
    return status;
  }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool write_to(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// Polls until `pid` has an event of `kind` or a second has gone; `first`
// says whether the first poll, right after waitpid(), already had it.
std::optional<KernelEvent> await_event(KernelLog& log, pid_t pid, Kind kind, bool& first) {
  for (int i = 0; i < 100; ++i) {
    log.poll();
    if (auto e = log.find(pid, kind)) {
      first = i == 0;
      return e;
    }
    usleep(10000);
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("real: a rank's own v1 memory cgroup sees the OOM kill of its worker", "[kernel-evidence]") {
  const auto token = "test-" + std::to_string(getpid());
  MemoryCgroups cgroups = MemoryCgroups::detect(token);
  if (geteuid() != 0 || cgroups.hierarchy() != MemoryCgroups::Hierarchy::v1) {
    WARN("skipped: needs root and the v1 memory controller (" << (geteuid() != 0 ? "not root" : cgroups.why()) << ")");
    return;
  }
  std::string why;
  auto log = KernelLog::open(why);
  if (!log) WARN("the kernel log part is skipped: " << why);

  Fd procs{cgroups.make_rank(0, 0, why)};
  REQUIRE(procs.fd >= 0);
  const std::string rank = cgroups.job_dir() + "/attempt-0/rank-0";
  // The limit in force is the job's, above the rank, as a host's would be.
  constexpr long long limit = 32LL << 20;
  REQUIRE(write_to(cgroups.job_dir() + "/memory.limit_in_bytes", std::to_string(limit)));
  write_to(cgroups.job_dir() + "/memory.memsw.limit_in_bytes", std::to_string(limit));  // no swapping out of it

  int ready[2], go[2];
  REQUIRE(pipe2(ready, O_CLOEXEC) == 0);
  REQUIRE(pipe2(go, O_CLOEXEC) == 0);
  Child child;
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    // Moves itself, as a worker does, then touches 256 MiB.
    char byte = 0;
    if (write(procs.fd, "0", 1) != 1) _exit(3);
    if (write(ready[1], "r", 1) != 1 || read(go[0], &byte, 1) != 1) _exit(4);
    const size_t size = 256u << 20;
    char* p = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) _exit(5);
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  CHECK(cgroups.cgroup_of(child.pid) == rank);
  CHECK(cgroups.cgroup_of(getpid()) == cgroups.own_dir());
  REQUIRE(write(go[1], "g", 1) == 1);
  close(ready[0]);
  close(go[1]);
  const pid_t pid = child.pid;
  const int status = child.wait();
  bool first_poll = false;
  const auto event = log ? await_event(*log, pid, Kind::oom_kill, first_poll) : std::nullopt;

  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  const MemoryReading own = MemoryCgroups::read(rank, true);
  const MemoryReading job = MemoryCgroups::read(cgroups.job_dir(), false);
  INFO("rank: limit " << format_bytes(own.limit.value_or(-1)) << ", peak " << format_bytes(own.peak.value_or(-1))
                      << ", oom_kill " << own.oom_kills.value_or(-1) << "; job: oom_kill " << job.oom_kills.value_or(-1)
                      << ", peak " << format_bytes(job.peak.value_or(-1)));
  CHECK(own.limit == limit);
  REQUIRE(own.peak);
  CHECK(*own.peak >= limit * 3 / 4);
  CHECK(*own.peak <= limit + (4LL << 20));
  CHECK(own.oom_kills == 1);
  CHECK(job.limit == limit);
  if (log) {
    REQUIRE(event);
    INFO("the kernel said: " << event->text << (first_poll ? " (read on the first poll after waitpid)" : ""));
    CHECK(event->pid == pid);
    CHECK(memory_cgroup_oom(*event));
    CHECK(event->text.find("Killed process " + std::to_string(pid) + " (") != std::string::npos);
    CHECK(first_poll);
  }
  cgroups.end_attempt(0);
  CHECK_FALSE(fs::exists(cgroups.job_dir() + "/attempt-0"));
  const std::string job_dir = cgroups.job_dir();
  { MemoryCgroups gone = std::move(cgroups); }
  CHECK_FALSE(fs::exists(job_dir));
}

TEST_CASE("real: the kernel log names the pid of a segfault", "[kernel-evidence]") {
  std::string why;
  auto log = KernelLog::open(why);
  std::ifstream trace("/proc/sys/debug/exception-trace");
  int traced = 0;
  if (!log || !(trace >> traced) || !traced) {
    WARN("skipped: " << (log ? "debug.exception-trace is off" : why));
    return;
  }
  Child child;
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    // The kernel prints only unhandled faults: Catch2's handler goes first.
    signal(SIGSEGV, SIG_DFL);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    *static_cast<volatile int*>(nullptr) = 1;
    _exit(0);
  }
  const pid_t pid = child.pid;
  const int status = child.wait();
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  bool first_poll = false;
  const auto event = await_event(*log, pid, Kind::fault, first_poll);
  // printk_ratelimit() may drop the line when the host faults a lot.
  REQUIRE(event);
  INFO(event->text);
  CHECK(event->text.find("segfault at 0 ") != std::string::npos);
  CHECK(first_poll);
}
