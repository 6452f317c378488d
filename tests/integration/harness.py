"""Shared helpers for process-level tests of the cxxrun binary.

Every wait here has a deadline: a hang fails the test instead of CI.
"""
import atexit
import collections
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

CXXRUN = os.environ.get("CXXRUN", os.path.join(os.path.dirname(__file__), "../../build/bin/cxxrun"))
EXAMPLES = os.environ.get("CXXRUN_EXAMPLES", os.path.join(os.path.dirname(__file__), "../../build/examples"))


# The ports handed out lately, oldest first; a port handed 4,000 picks ago
# is bound by its owner or long released, and a long run (chaos) must not
# use the range up.
_handed_ports = collections.OrderedDict()


def free_port():
    """A loopback port free right now, below the ephemeral range (32768 up):
    a port the OS hands out may be taken again at once as some connection's
    local port, and the agent that should listen there then cannot.

    Never the same port twice in one test process: a caller often asks for
    several before anything binds them (an etcd cluster's six), and a random
    pick repeated among them is a cluster that cannot start ("duplicate url")."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        if port in _handed_ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_ports[port] = None
        if len(_handed_ports) > 4000:
            _handed_ports.popitem(last=False)
        return port
    raise RuntimeError("no free port in 20000..32000")


# An expression a worker's Python code can print: whether it was forked from
# the forkserver, whose frames carry the zygote's file name (agent/warm/zygote.cc);
# ps and /proc show a forked worker as an exec'd one.
FORKED = 'any(f.filename == "cxxrun-forkserver" for f in __import__("traceback").extract_stack())'

RDZV_SERVER = os.path.join(os.path.dirname(CXXRUN), "cxxrun-rdzv")

# The python whose torch the torch tests run (workers, torchrun-side
# clients): Debian's torch 1.13 by default; CXXRUN_TORCH_PYTHON points at
# another (torch 2.x on the GPU machine, scripts/gpu-checks.sh).
TORCH_PYTHON = os.environ.get("CXXRUN_TORCH_PYTHON", "/usr/bin/python3")


def torch_importable(module="torch.distributed", check=""):
    """Whether TORCH_PYTHON imports `module` (and `check`, an expression, is true)."""
    code = f"import {module}" + (f"; import sys; sys.exit(0 if ({check}) else 1)" if check else "")
    try:
        return subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Failed jobs keep their log dirs (their error files); this test process's
# jobs keep them here, removed when it exits, instead of littering /tmp.
_JOB_TMPDIR = tempfile.mkdtemp(prefix="cxxrun_it_")
atexit.register(shutil.rmtree, _JOB_TMPDIR, True)


def clean_env(**extra):
    """The test's environment without launcher settings, plus `extra`. Each
    call gets its own PET_MASTER_PORT: the agent serves the workers' store
    there, and tests run side by side."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "OMP_NUM_THREADS", "CXXRUN_JOB"))}
    env["PET_MASTER_PORT"] = str(free_port())
    env["TMPDIR"] = _JOB_TMPDIR
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(args, env=None, timeout=60):
    """Runs cxxrun to completion; returns (returncode, stdout, stderr)."""
    p = subprocess.run([CXXRUN] + list(args), env=env or clean_env(), capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def start(args, env=None):
    return subprocess.Popen([CXXRUN] + list(args), env=env or clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def end(p):
    """Kills `p` (a start()ed cxxrun) if it still runs, reaps it, and closes
    its pipes: the cleanup of a test that reads them itself."""
    if p.poll() is None:
        p.kill()
        p.wait(timeout=10)
    p.stdout.close()
    p.stderr.close()


def finish_all(test, procs, timeout):
    """Waits for every process under one deadline; returns [(rc, out, err)].
    On a timeout, kills them all and fails `test` with every agent's stderr."""
    results = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            dumps = [f"--- agent {i} ---\n" + "".join(q.communicate(timeout=10)[1] or "")
                     for i, q in enumerate(procs)]
            test.fail(f"agents still running after {timeout}s:\n" + "\n".join(dumps))
        results.append((p.returncode, out, err))
    return results


def summary_blocks(err):
    """The failure summary's other failures and its root cause, as two strings."""
    failures, root = err.index("Failures:"), err.index("Root Cause")
    return err[failures:root], err[root:]


def wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def die_with_parent():
    """preexec_fn of a daemon a test starts (etcd, munged, slurmd...):
    SIGKILL when the test process dies, so a test killed at its timeout
    leaves nothing running."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def with_marker(marker):
    """Pids of live processes whose argv holds `marker` (an argument of its
    own): how tests find what a job left behind, whatever it did to hide."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if marker.encode() in argv and stat[stat.rfind(")") + 2] != "Z":
            found.append(int(name))
    return found


def own_v1_cgroup(controller):
    """This process's cgroup directory on the v1 hierarchy of `controller`
    (memory, freezer: the hybrid layout keeps them there), or None where that
    hierarchy is not mounted."""
    mount = f"/sys/fs/cgroup/{controller}"
    if not os.path.exists(os.path.join(mount, "cgroup.procs")):
        return None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller in controllers.split(","):
                return mount + (path if path != "/" else "")
    return None


def remove_cgroup_tree(path, kill=False, timeout=0.0):
    """Removes the cgroup at `path` and its children, children first; with
    `kill`, first writes cgroup.kill in each (cgroup v2). Tries again until
    `timeout` seconds have passed: a process just killed leaves its cgroup a
    moment later."""
    deadline = time.monotonic() + timeout
    while True:
        for root, dirs, _ in os.walk(path, topdown=False):
            for d in dirs + ([None] if kill else []):
                if d is None:
                    where = root
                else:
                    where = os.path.join(root, d)
                if kill:
                    try:
                        with open(os.path.join(where, "cgroup.kill"), "w") as f:
                            f.write("1")
                    except OSError:
                        pass
                if d is not None:
                    try:
                        os.rmdir(where)
                    except OSError:
                        pass
        try:
            os.rmdir(path)
        except OSError:
            pass
        if not os.path.isdir(path) or time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def alive(pid):
    """True when pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def read_pids(directory, prefix):
    pids = []
    for name in os.listdir(directory):
        if name.startswith(prefix):
            with open(os.path.join(directory, name)) as f:
                text = f.read().strip()
            if text:
                pids.append(int(text))
    return pids


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="cxxrun_test_")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def script(self, name, body):
        """Writes an executable shell script and returns its path.

        Written beside and renamed into place: a launcher already running may
        read the path at any moment, and a truncated file has no shebang, so
        it would run the script through python."""
        path = os.path.join(self.dir, name)
        with open(path + ".tmp", "w") as f:
            f.write("#!/bin/bash\n" + body)
        os.chmod(path + ".tmp", 0o755)
        os.replace(path + ".tmp", path)
        return path



class OrphanCheckTest(TempDirTest):
    """A test whose jobs start `sleep <self.marker>` processes: anything still
    carrying the marker when the test ends outlived its job, and fails it."""

    def setUp(self):
        super().setUp()
        # sleep adds its arguments up: a tiny fraction makes argv unique.
        self.marker = "0.00%06d" % random.randrange(10 ** 6)

    def tearDown(self):
        orphans = with_marker(self.marker)
        for pid in orphans:  # ours: they carry this test's marker
            os.kill(pid, signal.SIGKILL)
        super().tearDown()
        self.assertEqual(orphans, [], "processes outlived their job")