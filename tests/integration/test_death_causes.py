"""Every death explained (agent/forensics/death.h, docs/exit-codes.md): each cause in the
summary's `cause` line, in the event log, and as the job's exit code, made
for real. The OOM kill comes from a v1 memory cgroup with a small limit (the
hybrid layout's memory controller), the unkillable worker from a v1 freezer
cgroup (a frozen process ignores SIGKILL until thawed: a faithful D state),
the crash from a real segfault the kernel logs."""
import glob
import json
import os
import resource
import signal
import subprocess
import sys
import time
import unittest
import uuid

from harness import (CXXRUN, TempDirTest, clean_env, own_v1_cgroup, read_pids, remove_cgroup_tree, run, start,
                     summary_blocks, wait_for)

ROOT = os.geteuid() == 0


def failed_events(log):
    """The inner metadata of every WORKER FAILED event in an event log."""
    with open(log) as f:
        events = [json.loads(line) for line in f]
    return [json.loads(e["metadata"]["metadata"]) for e in events
            if e["name"] == "torchelastic.worker.status.FAILED" and e["source"] == "WORKER"]


ALLOCATE_ON_RANK_1 = """
import os, time
if os.environ["RANK"] == "1":
    time.sleep(0.3)
    block = bytearray(400 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
time.sleep(10)
"""


class LimitedMemory(TempDirTest):
    """A job in a memory cgroup limited to 128 MiB, running WORKER."""
    WORKER = ""

    def setUp(self):
        super().setUp()
        os.chmod(self.dir, 0o777)
        self.cgroup = os.path.join(own_v1_cgroup("memory"), f"cxxrun-test-oom-{uuid.uuid4().hex[:8]}")
        os.mkdir(self.cgroup)
        with open(os.path.join(self.cgroup, "memory.limit_in_bytes"), "w") as f:
            f.write(str(128 * 1024 * 1024))
        self.worker = os.path.join(self.dir, "alloc.py")
        with open(self.worker, "w") as f:
            f.write(self.WORKER)
        os.chmod(self.worker, 0o644)

    def tearDown(self):
        remove_cgroup_tree(self.cgroup, timeout=10)
        super().tearDown()

    def launch(self, args, as_user=None):
        """cxxrun inside the limited cgroup (it joins before exec), optionally
        as another user."""
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        os.chmod(tmp, 0o777)
        prefix = ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups"] if as_user else []
        # The interpreter itself, not a wrapper (pyenv's shim) whose own
        # children would share the worker's wait4 peak.
        python = {} if as_user else {"PYTHON_EXEC": os.path.realpath(sys.executable)}
        p = subprocess.run(["sh", "-c", f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"', "sh"] + prefix +
                           [CXXRUN] + args, env=clean_env(TMPDIR=tmp, HOME=tmp, **python),
                           capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL, cwd=self.dir)
        return p.returncode, p.stderr


@unittest.skipUnless(ROOT and own_v1_cgroup("memory"), "needs root and a cgroup v1 memory hierarchy")
class OutOfMemory(LimitedMemory):
    """Rank 1 allocates 400 MiB."""
    WORKER = ALLOCATE_ON_RANK_1

    def test_the_oom_killed_rank_is_named_with_the_limit_and_its_peak(self):
        log = os.path.join(self.dir, "events.jsonl")
        rc, err = self.launch(["--nproc-per-node=2", f"--event-log={log}", self.worker])
        self.assertEqual(rc, 241, err)  # not 137: a scheduler can tell "needs more memory"
        _, root = summary_blocks(err)
        self.assertIn("rank      : 1 (local_rank: 1)", root)
        self.assertIn("cause     : oom-killed: the kernel's OOM killer killed pid", root)
        self.assertIn(f"memory limit 128 MiB set on memory cgroup {self.cgroup}", root)
        self.assertRegex(root, r"; peak \d+(\.\d)? MiB charged to its memory cgroup; its own peak RSS \d+(\.\d)? MiB")
        self.assertIn("was killed by SIGKILL: oom-killed", err)  # the log line says it too
        failed = failed_events(log)
        self.assertEqual([e["cause"] for e in failed], ["oom-killed"], failed)
        self.assertIn("memory limit 128 MiB", failed[0]["cause_detail"])
        with open(log) as f:
            agent = [json.loads(line) for line in f if '"source":"AGENT"' in line]
        self.assertIn("exit code 241: rank 1: oom-killed: the kernel's OOM killer killed pid",
                      agent[-1]["metadata"]["raw_error"])

    def test_without_root_the_missing_evidence_is_named_not_guessed(self):
        rc, err = self.launch(["--nproc-per-node=2", self.worker], as_user=65534)
        self.assertEqual(rc, 137, err)
        _, root = summary_blocks(err)
        self.assertIn("cause     : killed-by-signal: SIGKILL, not sent by cxxrun;", root)
        self.assertIn(f"memory cgroup {self.cgroup} counted 1 OOM kill while it ran, but other processes share it",
                      " ".join(root.split()))
        self.assertIn("is not readable", root)


# Rank 1's data loader: a child process (forked, as torch's DataLoader forks
# its workers) allocates 400 MiB; the OOM killer kills it; the rank sees its
# worker die and raises, as torch does.
CHILD_ALLOCATES_ON_RANK_1 = """
import multiprocessing, os, time
def load():
    block = bytearray(400 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
if os.environ["RANK"] == "1":
    time.sleep(0.3)
    p = multiprocessing.get_context("fork").Process(target=load)
    p.start()
    p.join()
    raise RuntimeError(f"DataLoader worker (pid {p.pid}) is killed by signal: Killed.")
time.sleep(10)
"""


@unittest.skipUnless(ROOT and own_v1_cgroup("memory"), "needs root and a cgroup v1 memory hierarchy")
class ChildOutOfMemory(LimitedMemory):
    """Rank 1's data loader child is OOM-killed; rank 1 then fails with exit 1."""
    WORKER = CHILD_ALLOCATES_ON_RANK_1

    def test_a_rank_whose_child_the_oom_killer_killed_exits_241(self):
        rc, err = self.launch(["--nproc-per-node=2", self.worker])
        self.assertEqual(rc, 241, err)  # an OOM for the exit contract, not 1
        _, root = summary_blocks(err)
        root = " ".join(root.split())
        self.assertIn("rank : 1 (local_rank: 1)", root)
        self.assertIn("the OOM killer killed 1 of its child processes", root)
        # wait4's peak includes the reaped child's: not called the rank's own.
        self.assertRegex(root, r"peak RSS \d+(\.\d)? MiB of it or one of the child processes it reaped")
        self.assertNotRegex(root, r"its own peak RSS \d")


@unittest.skipUnless(ROOT and own_v1_cgroup("freezer"), "needs root and a cgroup v1 freezer hierarchy")
class Unkillable(TempDirTest):
    """Rank 1 is frozen (v1 freezer): SIGKILL cannot end it until it is thawed."""

    def test_a_worker_that_outlives_sigkill_is_reported_and_the_agent_exits(self):
        freezer = os.path.join(own_v1_cgroup("freezer"), f"cxxrun-test-frozen-{uuid.uuid4().hex[:8]}")
        worker = self.script("w.sh", f"""
if [ "$LOCAL_RANK" = 1 ]; then echo $$ > {self.dir}/pid.1; exec sleep 60; fi
while [ ! -e {self.dir}/frozen ]; do sleep 0.05; done
exit 3
""")
        p = start(["--nproc-per-node=2", "--shutdown-timeout=1", "--kill-timeout=2", worker])
        frozen_pid, err, elapsed = None, "", None
        try:
            wait_for(lambda: read_pids(self.dir, "pid."), timeout=30, what="rank 1's pid")
            frozen_pid = read_pids(self.dir, "pid.")[0]
            os.mkdir(freezer)
            with open(os.path.join(freezer, "cgroup.procs"), "w") as f:
                f.write(str(frozen_pid))
            with open(os.path.join(freezer, "freezer.state"), "w") as f:
                f.write("FROZEN")
            wait_for(lambda: open(os.path.join(freezer, "freezer.state")).read().strip() == "FROZEN",
                     timeout=10, what="the freezer")
            began = time.monotonic()
            open(os.path.join(self.dir, "frozen"), "w").close()
            out, err = p.communicate(timeout=60)
            elapsed = time.monotonic() - began
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
            if os.path.isdir(freezer):
                with open(os.path.join(freezer, "freezer.state"), "w") as f:
                    f.write("THAWED")
            if frozen_pid:
                wait_for(lambda: not os.path.exists(f"/proc/{frozen_pid}"), timeout=10, what="the thawed worker")
            remove_cgroup_tree(freezer, timeout=10)
            self.remove_leftovers(err)
        self.assertEqual(p.returncode, 242, err)
        # The grace (1 s), then --kill-timeout (2 s): bounded, not forever.
        self.assertLess(elapsed, 15, err)
        self.assertIn(f"rank 1 (local_rank 1, pid {frozen_pid}) is unkillable: state ", err)
        self.assertIn("this node is unhealthy", err)
        # Listed in the summary; rank 0's exit 3 stays the root cause.
        failures, root = summary_blocks(err)
        self.assertIn("cause     : exited 3", root)
        self.assertIn("cause     : unkillable: alive after SIGKILL; state ", failures)
        self.assertIn("still alive 2000 ms after SIGKILL (--kill-timeout)", " ".join(err.split()))
        self.assertIn("leaving cgroup", err)

    def remove_leftovers(self, err):
        """The job's cgroups the agent had to leave behind (its containment
        cgroup, the rank memory cgroups), named by its containment line:
        removable now that the frozen worker is gone."""
        for line in err.splitlines():
            if "containment: the job's processes live in cgroup " in line:
                job = line.split("live in cgroup ", 1)[1].strip()
                remove_cgroup_tree(job, timeout=10)
                memory = own_v1_cgroup("memory")
                if memory:
                    remove_cgroup_tree(os.path.join(memory, os.path.basename(job)), timeout=10)


class Crashes(TempDirTest):
    @unittest.skipUnless(ROOT and os.access("/dev/kmsg", os.R_OK), "the kernel log needs root here")
    def test_a_native_crash_shows_the_kernel_fault_line_and_the_core_file(self):
        def allow_cores():
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
        p = subprocess.run([CXXRUN, "--nproc-per-node=1", "--no-python", "python3", "-c",
                            "import ctypes; ctypes.string_at(0)"], env=clean_env(), capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL, cwd=self.dir, preexec_fn=allow_cores)
        err = p.stderr
        self.assertEqual(p.returncode, 139, err)
        _, root = summary_blocks(err)
        self.assertRegex(root, r"cause     : crashed: SIGSEGV; kernel: python3\[\d+\]: segfault at 0 ip ")
        if pattern == "core" or pattern.startswith("core"):
            self.assertIn("core dumped to " + self.dir + "/core", " ".join(root.split()))
            self.assertTrue(glob.glob(os.path.join(self.dir, "core*")), os.listdir(self.dir))

    def test_no_core_file_says_why(self):
        def no_cores():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        p = subprocess.run([CXXRUN, "--nproc-per-node=1", "--no-python", "sh", "-c", "kill -ABRT $$"],
                           env=clean_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                           cwd=self.dir, preexec_fn=no_cores)
        self.assertEqual(p.returncode, 134, p.stderr)
        self.assertIn("cause     : crashed: SIGABRT; no core file: the core size limit is 0 (ulimit -c)", p.stderr)

    def test_a_python_exception_without_an_error_file(self):
        script = os.path.join(self.dir, "boom.py")
        with open(script, "w") as f:
            f.write("raise ValueError('boom')\n")
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=1", f"--event-log={log}", script])
        self.assertEqual(rc, 1, err)
        self.assertIn("cause     : exception: a Python traceback on stderr: ValueError: boom; in its own code at "
                      f"{script}:1 in <module>: raise ValueError('boom')", err)
        self.assertEqual([e["cause"] for e in failed_events(log)], ["exception"])

    def test_a_long_traceback_is_an_exception_with_its_message_and_the_users_frame(self):
        # Python 3.11's markers make four frames more than ten lines.
        script = self.python("deep.py", """
import json
def parse(text):
    return json.loads(text)
def load(path):
    return parse(open(path).read() + "{")
def main():
    load(__file__)
main()
""")
        rc, out, err = run(["--nproc-per-node=1", script])
        self.assertEqual(rc, 1, err)
        _, root = summary_blocks(err)
        self.assertIn(f"cause     : exception: a Python traceback on stderr: json.decoder.JSONDecodeError: Expecting "
                      f"value: line 2 column 1 (char 1); in its own code at {script}:4 in parse: return "
                      "json.loads(text)", root)
        self.assertIn("traceback : Traceback (most recent call last):", root)

    def test_a_segfault_in_a_side_thread_shows_the_thread_that_crashed(self):
        script = self.python("side.py", """
import ctypes, threading
def crash():
    ctypes.string_at(0)
t = threading.Thread(target=crash)
t.start()
t.join()
""")
        rc, out, err = run(["--nproc-per-node=1", script])
        self.assertEqual(rc, 139, err)
        _, root = summary_blocks(err)
        self.assertIn(f"cause     : crashed: SIGSEGV; faulthandler: the thread that crashed was in its own code at "
                      f"{script}:4 in crash", root)
        traceback = root[root.index("traceback : "):root.index("stderr (last")]
        self.assertIn(f'File "{script}", line 4 in crash', traceback)
        self.assertIn("(1 other thread not shown)", traceback)
        self.assertNotIn(" in join", traceback)
        if ROOT and os.access("/dev/kmsg", os.R_OK):
            # The kernel logs no fault line for a signal a handler took.
            self.assertIn("fault address unknown: Python's faulthandler caught the SIGSEGV and raised it again",
                          " ".join(root.split()))
            self.assertNotIn("another of its threads", root)

    @unittest.skipUnless(ROOT and os.access("/dev/kmsg", os.R_OK), "the kernel log needs root here")
    def test_a_main_thread_fault_faulthandler_took_says_so(self):
        script = self.python("main.py", "import ctypes\nctypes.string_at(0)\n")
        rc, out, err = run(["--nproc-per-node=1", script])
        self.assertEqual(rc, 139, err)
        _, root = summary_blocks(err)
        root = " ".join(root.split())
        self.assertIn("fault address unknown: Python's faulthandler caught the SIGSEGV and raised it again, so the "
                      "kernel logged no fault line", root)
        self.assertNotIn("another of its threads", root)

    @unittest.skipUnless(ROOT and os.access("/dev/kmsg", os.R_OK), "the kernel log needs root here")
    def test_a_native_fault_in_a_side_thread_keeps_the_kernels_line(self):
        # No faulthandler: the kernel logs the fault under the thread's id.
        script = self.python("thread.py", """
import ctypes, faulthandler, threading, time
faulthandler.disable()
def crash():
    time.sleep(2)  # the agent reads its threads every second
    ctypes.string_at(0)
t = threading.Thread(target=crash)
t.start()
t.join()
""")
        rc, out, err = run(["--nproc-per-node=1", script])
        self.assertEqual(rc, 139, err)
        _, root = summary_blocks(err)
        self.assertRegex(" ".join(root.split()), r"crashed: SIGSEGV; kernel: \S+\[(\d+)\]: segfault at 0 ip .* \(thread "
                         r"\1 of it\)")

    def python(self, name, body):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(body)
        return path


class CxxrunsOwnKills(TempDirTest):
    def test_a_worker_that_ignores_sigterm_is_named_as_killed_after_the_grace(self):
        worker = self.script("w.sh", f"""
if [ "$LOCAL_RANK" = 1 ]; then trap '' TERM; touch {self.dir}/ready; sleep 30; exit 0; fi
while [ ! -e {self.dir}/ready ]; do sleep 0.05; done
exit 3
""")
        rc, out, err = run(["--nproc-per-node=2", "--shutdown-timeout=1", worker], timeout=60)
        self.assertEqual(rc, 3, err)  # the root cause's own code
        failures, root = summary_blocks(err)
        self.assertIn("cause     : exited 3", root)
        self.assertIn("rank      : 1 (local_rank: 1)", failures)
        self.assertIn("exitcode  : -9 (SIGKILL from cxxrun, after the shutdown grace)", failures)
        self.assertIn("cause     : killed-by-cxxrun: the shutdown grace: it did not stop within the 1000 ms "
                      "shutdown grace; ended by SIGKILL", failures)

    def test_fault_injection_is_named(self):
        worker = self.script("w.sh", "sleep 10\n")
        rc, out, err = run(["--nproc-per-node=1", "--inject-fault=kill:rank=0,after=200", worker], timeout=60)
        self.assertEqual(rc, 137, err)  # a test's own kill is not an infrastructure cause
        self.assertIn("cause     : killed-by-cxxrun: fault injection: --inject-fault sent SIGKILL; ended by SIGKILL",
                      err)

    def test_an_admins_kill_is_not_cxxrun(self):
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$LOCAL_RANK\nexec sleep 30\n")
        p = start(["--nproc-per-node=1", worker])
        try:
            wait_for(lambda: read_pids(self.dir, "pid."), timeout=30, what="the worker's pid")
            os.kill(read_pids(self.dir, "pid.")[0], signal.SIGKILL)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
        self.assertEqual(p.returncode, 137, err)
        self.assertIn("cause     : killed-by-signal: SIGKILL, not sent by cxxrun;", err)
        if ROOT and own_v1_cgroup("memory"):
            # Its own memory cgroup counted no OOM kill: certain, not a guess.
            self.assertIn("the OOM killer did not kill it", err)
