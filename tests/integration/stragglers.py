"""What the straggler tests share (test_straggler*.py): a CPU quota on chosen
processes, the way real nodes are slowed (a v1 cpu cgroup's CFS quota, not
a sleep in the program), the synchronous torch job they slow, and an
agent's stderr read as it comes, each line with the time it arrived."""
import os
import threading
import time
import uuid

from harness import TORCH_PYTHON, TempDirTest, clean_env, remove_cgroup_tree, torch_importable, wait_for

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_jobs")
LOCKSTEP = os.path.join(JOBS, "lockstep.py")
# What the issue asks: a straggler named within 30 s of its slowdown. That
# is measured in bench/stragglers.py (bench/RESULTS.md), not asserted: the
# tests wait NAMED_IN_TESTS, so a CI machine busy with other tests cannot
# turn a measurement into a flaky failure (one CI run took over 30 s).
NAMED_WITHIN = 30
NAMED_IN_TESTS = 90


def cpu_mount():
    """The v1 cpu hierarchy's mount point (cpu, or cpu,cpuacct), or None."""
    with open("/proc/mounts") as f:
        for line in f:
            _, where, kind, options = line.split()[:4]
            if kind == "cgroup" and "cpu" in options.split(",") and os.path.exists(
                    os.path.join(where, "cpu.cfs_quota_us")):
                return where
    return None


def cannot_throttle():
    """Why this machine cannot run the quota tests, or None."""
    if os.geteuid() != 0:
        return "not root: cannot make a cpu cgroup"
    if cpu_mount() is None:
        return "no v1 cpu cgroup hierarchy (cpu.cfs_quota_us)"
    return None


class CpuQuota:
    """A cpu cgroup of its own that lets its processes run `share` of one
    CPU; add() moves a process (all its threads) in. remove() moves any
    left back to the root and removes the cgroup."""

    def __init__(self, share):
        self.mount = cpu_mount()
        self.path = os.path.join(self.mount, f"cxxrun_test_{uuid.uuid4().hex[:8]}")
        os.mkdir(self.path)
        self._write("cpu.cfs_period_us", "100000")
        self._write("cpu.cfs_quota_us", str(int(share * 100000)))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def add(self, pid):
        self._write("cgroup.procs", str(pid))

    def remove(self):
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                left = [line.strip() for line in f if line.strip()]
        except OSError:
            left = []
        for pid in left:
            try:
                with open(os.path.join(self.mount, "cgroup.procs"), "w") as f:
                    f.write(pid)
            except OSError:
                pass  # it exited meanwhile
        remove_cgroup_tree(self.path, timeout=10)


def lockstep_env(pid_dir, **extra):
    """The environment of a lockstep.py job: one thread per rank, pids in
    `pid_dir`, at most 4 minutes."""
    return clean_env(PYTHON_EXEC=TORCH_PYTHON, PET_START_METHOD="spawn", OMP_NUM_THREADS="1", PID_DIR=pid_dir,
                     MAX_SECONDS=extra.pop("MAX_SECONDS", "240"), **extra)


def read_pid(pid_dir, rank):
    try:
        with open(os.path.join(pid_dir, f"pid.{rank}")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


class Output:
    """A started agent's stderr and stdout, each read on a thread of its own
    (an unread pipe would stall the agent), every line with its arrival
    time: first() looks in stderr, stdout_first() in stdout."""

    def __init__(self, proc):
        self.proc = proc
        self._lock = threading.Lock()
        self._lines = {"err": [], "out": []}
        self._threads = [threading.Thread(target=self._read, args=(stream, name), daemon=True)
                         for stream, name in ((proc.stderr, "err"), (proc.stdout, "out"))]
        for t in self._threads:
            t.start()

    def _read(self, stream, name):
        for line in stream:
            with self._lock:
                self._lines[name].append((time.monotonic(), line))

    def join(self, timeout):
        for t in self._threads:
            t.join(timeout)

    def _first(self, name, text):
        with self._lock:
            return next(((t, line) for t, line in self._lines[name] if text in line), None)

    def first(self, text):
        """(arrival time, line) of the first stderr line holding `text`, or None."""
        return self._first("err", text)

    def stdout_first(self, text):
        return self._first("out", text)

    def text(self):
        with self._lock:
            return "".join(line for _, line in self._lines["err"])


def settle_then_throttle(test, pid_dir, ranks, share=0.2, world=4):
    """Waits for every rank of the job to run and lets it settle past its
    first window, then puts `ranks` under one quota of `share` of a CPU
    (removed at the test's end); returns the quota."""
    wait_for(lambda: all(read_pid(pid_dir, r) for r in range(world)), timeout=120, what=f"the job's {world} ranks")
    time.sleep(7)
    quota = CpuQuota(share)
    test.addCleanup(quota.remove)
    for r in ranks:
        quota.add(read_pid(pid_dir, r))
    return quota


class ThrottleTest(TempDirTest):
    """A test that slows a rank with the v1 cpu controller and runs a torch
    job: skipped where either cannot be had."""

    def setUp(self):
        super().setUp()
        why = cannot_throttle()
        if why:
            self.skipTest(why)
        if not torch_importable():
            self.skipTest("torch is not importable")
