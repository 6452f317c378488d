"""Hangs caught without code changes (--hang-timeout), with every rank's
stack taken before the kill and the rank that stands apart named
(agent/hang/watchdog.h, agent/hang/stack_dump.h, agent/hang/culprit.h)."""
import glob
import json
import os
import re
import shutil
import subprocess
import time
import unittest

from harness import CXXRUN, TORCH_PYTHON, TempDirTest, clean_env, run, summary_blocks, torch_importable

SHARED_LIBRARY = os.path.join(os.path.dirname(os.path.dirname(CXXRUN)), "lib", "libcxxrun_worker.so")

# Four ranks all_reduce every step over gloo; rank 3 wedges on a lock at
# step 30 (the job): its peers then wait in all_reduce.
WEDGED_JOB = """
import os, threading, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
lock = threading.Lock()


def wedge():
    lock.acquire()
    lock.acquire()


t = torch.ones(4)
for step in range(100000):
    if dist.get_rank() == 3 and step == 30:
        wedge()
    dist.all_reduce(t)
"""

NATIVE_WEDGE = r"""
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void wedge(void) { pthread_mutex_lock(&m); pthread_mutex_lock(&m); }
int main(void) {
  if (atoi(getenv("RANK")) == 1) wedge();
  sleep(600);
  return 0;
}
"""

# C++ without debug info: ranks 0-2 wait on one lock, rank 3 on another, all
# in the same libc function; only their own functions tell them apart.
NATIVE_CXX_WEDGE = r"""
#include <pthread.h>
#include <cstdlib>
static pthread_mutex_t peers = PTHREAD_MUTEX_INITIALIZER, mine = PTHREAD_MUTEX_INITIALIZER;
__attribute__((noinline)) void wait_for_peers(int rank) { pthread_mutex_lock(&peers); pthread_mutex_lock(&peers); (void)rank; }
namespace {
__attribute__((noinline)) void wedge(char const* why) { pthread_mutex_lock(&mine); pthread_mutex_lock(&mine); (void)why; }
}
int main() {
  int rank = atoi(getenv("RANK"));
  if (rank == 3) wedge("lock");
  else wait_for_peers(rank);
}
"""


class HangTimeout(TempDirTest):
    @unittest.skipUnless(torch_importable("torch.distributed"), "needs torch")
    def test_the_wedged_rank_is_named_with_its_stack(self):
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WEDGED_JOB)
        logs = os.path.join(self.dir, "logs")
        began = time.monotonic()
        rc, out, err = run(["--nproc-per-node=4", "--hang-timeout=10", f"--log-dir={logs}", script],
                           env=clean_env(PYTHON_EXEC=TORCH_PYTHON), timeout=120)
        elapsed = time.monotonic() - began
        self.assertEqual(rc, 240, err)
        self.assertLess(elapsed, 30, err)
        self.assertIn("no worker made progress", err)
        self.assertIn("ranks 0\u20132 wait in all_reduce at w.py:", err)
        self.assertIn("rank 3 waits in wedge at w.py:12", err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("cause     : killed-by-cxxrun: the hang watchdog:", root)
        self.assertIn("rank 3 stands apart", root)
        self.assertIn('line 12 in wedge', root)  # its stack is the traceback
        bundles = glob.glob(os.path.join(logs, "*", "attempt_0", "hang-0"))
        self.assertEqual(len(bundles), 1, err)
        self.assertEqual(sorted(os.listdir(bundles[0])), [f"rank-{r}.txt" for r in range(4)])
        with open(os.path.join(bundles[0], "rank-0.txt")) as f:
            self.assertIn("in all_reduce", f.read())

    @unittest.skipUnless(shutil.which("eu-stack") and shutil.which("cc"), "needs elfutils' eu-stack and a C compiler")
    def test_a_native_workers_hang_shows_a_native_stack(self):
        source = os.path.join(self.dir, "w.c")
        with open(source, "w") as f:
            f.write(NATIVE_WEDGE)
        program = os.path.join(self.dir, "wedge")
        subprocess.run(["cc", "-g", "-O0", "-o", program, source, "-lpthread"], check=True)
        logs = os.path.join(self.dir, "logs")
        events = os.path.join(self.dir, "events.jsonl")
        # Ranks 0 and 2 sleep, rank 1 is wedged: it stands apart.
        rc, out, err = run(["--nproc-per-node=3", "--hang-timeout=2", f"--log-dir={logs}", f"--event-log={events}",
                            program], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("rank 1 waits in pthread_mutex_lock at w.c:6", err.replace("__pthread", "pthread"))
        _, root = summary_blocks(err)
        self.assertIn("rank      : 1 (local_rank: 1)", root)
        self.assertIn("wedge - " + program, root)  # eu-stack's frame, in the traceback
        # The event log's UNHEALTHY event says the same, with the stack.
        with open(events) as f:
            unhealthy = [json.loads(line) for line in f if "status.UNHEALTHY" in line]
        self.assertEqual(len(unhealthy), 1)
        self.assertEqual(unhealthy[0]["metadata"]["global_rank"], 1)
        inner = json.loads(unhealthy[0]["metadata"]["metadata"])
        self.assertIn("rank 1 waits in", inner["hang"])
        self.assertIn("wedge - " + program, json.loads(unhealthy[0]["metadata"]["raw_error"])["message"])

    @unittest.skipUnless(shutil.which("eu-stack") and shutil.which("c++"), "needs elfutils' eu-stack and a C++ compiler")
    def test_native_cxx_ranks_without_debug_info_are_told_apart(self):
        source = os.path.join(self.dir, "w.cc")
        with open(source, "w") as f:
            f.write(NATIVE_CXX_WEDGE)
        program = os.path.join(self.dir, "wedge")
        subprocess.run(["c++", "-O1", "-o", program, source, "-lpthread"], check=True)
        rc, out, err = run(["--nproc-per-node=4", "--hang-timeout=2", program], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("ranks 0\u20132 wait in __pthread_mutex_lock at wait_for_peers in wedge", err)
        self.assertIn("rank 3 waits in __pthread_mutex_lock at (anonymous namespace)::wedge in wedge", err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("rank 3 stands apart", root)
        self.assertIn("(anonymous namespace)::wedge(char const*) - " + program, root)

    def test_side_thread_beats_alone_arm_the_judge(self):
        # No beat from the main thread at all: the side thread's first beat
        # arms --heartbeat-timeout, the others count only while the main
        # thread moves, and it is wedged.
        script = os.path.join(self.dir, "side.py")
        with open(script, "w") as f:
            f.write("import threading, time\n"
                    "import cxxrun\n"
                    "def beat():\n"
                    "    while True:\n"
                    "        cxxrun.heartbeat()\n"
                    "        time.sleep(0.1)\n"
                    "threading.Thread(target=beat, daemon=True).start()\n"
                    "threading.Event().wait()  # the main thread wedges\n")
        rc, out, err = run(["--nproc-per-node=1", "--heartbeat-timeout=2", script], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("no heartbeat for", err)

    def test_a_section_from_a_side_thread_is_ignored(self):
        # `import cxxrun` with no install step; the main thread's section is judged.
        with_section = os.path.join(self.dir, "section.py")
        with open(with_section, "w") as f:
            f.write("import threading, cxxrun\n"
                    "def side():\n"
                    "    with cxxrun.section('other', timeout=0.5):\n"
                    "        threading.Event().wait()\n"
                    "threading.Thread(target=side, daemon=True).start()\n"
                    "with cxxrun.section('step', timeout=1):\n"
                    "    threading.Event().wait()\n")
        rc, out, err = run(["--nproc-per-node=1", "--section-timeout=other=60", with_section], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("section 'step' open for", err)
        self.assertNotIn("section 'other'", err)
        self.assertIn("section() from a thread other than the main one is ignored", err)

    def test_the_nccl_flight_recorder_is_on_and_its_dumps_join_the_bundle(self):
        # torch writes <TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank> when NCCL times
        # out; here the worker writes it, as torch would, then hangs.
        worker = self.script("w.sh", f"""
env | grep '^TORCH_NCCL_' | sort > {self.dir}/env.$RANK
echo trace of $RANK > "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE$RANK"
exec sleep 60
""")
        logs = os.path.join(self.dir, "logs")
        rc, out, err = run(["--nproc-per-node=2", "--hang-timeout=2", f"--log-dir={logs}", worker],
                           env=clean_env(TORCH_NCCL_TRACE_BUFFER_SIZE="5"), timeout=60)
        self.assertEqual(rc, 240, err)
        with open(os.path.join(self.dir, "env.0")) as f:
            env = dict(line.rstrip("\n").split("=", 1) for line in f)
        self.assertEqual(env["TORCH_NCCL_TRACE_BUFFER_SIZE"], "5")  # the user's own
        self.assertEqual(env["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1")
        self.assertTrue(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"].endswith("/attempt_0/0/nccl_trace_rank_"), env)
        bundle = glob.glob(os.path.join(logs, "*", "attempt_0", "hang-0"))[0]
        self.assertIn("nccl_trace_rank_1", os.listdir(bundle))
        # Native workers without eu-stack's view still get a file each.
        self.assertIn("rank-0.txt", os.listdir(bundle))

    def test_ctypes_loads_the_worker_library(self):
        # The worker runtime as a shared object: its C ABI from ctypes.
        script = os.path.join(self.dir, "ct.py")
        with open(script, "w") as f:
            f.write("import ctypes, sys, threading\n"
                    "lib = ctypes.CDLL(sys.argv[1])\n"
                    "lib.cxxrun_section_begin.argtypes = [ctypes.c_char_p, ctypes.c_double]\n"
                    "assert lib.cxxrun_heartbeat_init() == 0\n"
                    "lib.cxxrun_heartbeat_beat()\n"
                    "assert lib.cxxrun_section_begin(b'load', 1.0) == 0\n"
                    "threading.Event().wait()\n")
        rc, out, err = run(["--nproc-per-node=1", "--heartbeat-timeout=60", script, SHARED_LIBRARY], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("section 'load' open for", err)

    def test_a_busy_job_is_not_hung(self):
        # Output is progress, and so is CPU: neither worker is idle for 2 s.
        worker = self.script("w.sh", 'for i in $(seq 1 30); do echo step $i; sleep 0.1; done\n'
                                     'end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do :; done\n')
        rc, out, err = run(["--nproc-per-node=2", "--hang-timeout=2", worker], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("no worker made progress", err)


# Four ranks over gloo, one fault each (docs/hangs.md, "Whom a verdict
# blames"). MODE picks the fault; every rank all_reduces in a loop, inside a
# section named step, so every judge sees them.
BLAME_JOB = """
import os, signal, sys, threading, time
import torch
import torch.distributed as dist
import cxxrun

mode = os.environ["MODE"]
dist.init_process_group("gloo")
rank = dist.get_rank()
lock = threading.Lock()


def wedge():
    lock.acquire()
    lock.acquire()


def beat():
    while True:
        cxxrun.heartbeat()
        time.sleep(0.1)


if mode in ("side-beats", "healthy"):
    threading.Thread(target=beat, daemon=True).start()
t = torch.ones(4)
for step in range(100000):
    if mode == "healthy" and step == 400:
        break
    if mode == "healthy":
        time.sleep(0.01)
    with cxxrun.section("step"):
        if step == 20 and mode in ("wedge", "side-beats") and rank == 3:
            wedge()
        if step == 20 and mode == "stop" and rank == 2:
            os.kill(os.getpid(), signal.SIGSTOP)
        if step == 20 and mode == "split":
            if rank < 2:
                dist.all_reduce(t)
            else:
                dist.barrier()
        dist.all_reduce(t)
"""

HUNG_LINE = re.compile(r"(worker|workers|job) hung: ")


@unittest.skipUnless(torch_importable("torch.distributed"), "needs torch")
class Blame(TempDirTest):
    """The rank blamed and killed is the one the analysis picks: never the
    first rank checked, never a rank said to stand apart when none does."""

    def job(self, mode, flags):
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(BLAME_JOB)
        rc, out, err = run(["--nproc-per-node=4"] + flags + [script],
                           env=clean_env(PYTHON_EXEC=TORCH_PYTHON, MODE=mode), timeout=180)
        self.assertEqual(rc, 240, err)
        # One hang, one verdict line, whatever the other ranks' judges say.
        self.assertEqual(len(HUNG_LINE.findall(err)), 1, err)
        return err

    def test_a_section_verdict_blames_the_wedged_rank_not_the_first_checked(self):
        err = self.job("wedge", ["--section-timeout=step=3"])
        self.assertIn("ranks 0\u20132 wait in all_reduce at w.py:", err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("rank 3 stands apart", root)
        self.assertIn("in wedge", root)  # its own stack is the traceback

    def test_side_thread_heartbeats_do_not_hide_a_wedged_main_thread(self):
        # Only side threads beat: their first beat arms the judge, later ones
        # count only while the main thread moves.
        err = self.job("side-beats", ["--heartbeat-timeout=3"])
        self.assertIn("no heartbeat for", err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("rank 3 stands apart", root)

    def test_side_thread_heartbeats_of_a_healthy_job_keep_it_alive(self):
        # The main threads move (CPU, lines) while the side threads beat: no
        # verdict, though the run is longer than the timeout.
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(BLAME_JOB)
        rc, out, err = run(["--nproc-per-node=4", "--heartbeat-timeout=2", script],
                           env=clean_env(PYTHON_EXEC=TORCH_PYTHON, MODE="healthy"), timeout=180)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("hung", err)

    def test_a_two_two_split_names_no_rank_as_standing_apart(self):
        err = self.job("split", ["--hang-timeout=4"])
        self.assertIn("no rank stands apart", err)
        self.assertIn("ranks 0, 1 wait in all_reduce at w.py:", err)
        self.assertIn("ranks 2, 3 wait in barrier at w.py:", err)
        self.assertNotIn("stands apart;", err.replace("no rank stands apart;", ""))
        _, root = summary_blocks(err)
        self.assertIn("killed only to stop the job, not as its cause", root)
        # The summary does not present the killed rank as the root cause: it
        # says none could be named, and shows the groups.
        self.assertNotIn("Root Cause (first observed failure)", err)
        self.assertRegex(root, r"^Root Cause \(none could be named: no rank stands apart\):\n"
                               r"  ranks 0, 1 wait in all_reduce at w\.py:\d+\n"
                               r"  ranks 2, 3 wait in barrier at w\.py:\d+\n"
                               r"First observed failure \(rank 0, killed only to stop the job, not as its cause\):\n"
                               r"\[0\]:\n")

    def test_a_stopped_rank_is_the_reason_of_the_hang(self):
        err = self.job("stop", ["--hang-timeout=4"])
        self.assertIn("was stopped by SIGSTOP", err)  # the group's own line, at once
        _, root = summary_blocks(err)
        self.assertIn("rank      : 2 (local_rank: 2)", root)
        self.assertIn("rank 2 was stopped by a signal at", root)
        # Its hook cannot run while it is stopped: its stack is read from
        # outside where it stands (the interpreter's, in the kill that stopped
        # it), and it stays stopped until the watchdog's SIGKILL.
        self.assertNotIn("rank 2: no stack", err)
        self.assertIn("rank 2 waits in kill at python3", root)
        self.assertRegex(root, r"traceback : PID \d+ - process\n\s+TID \d+:")
        self.assertNotRegex(err, r"rank 2 \(local_rank 2, pid \d+\) continued")
