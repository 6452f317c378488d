"""A job on a shared machine (docs/torchrun-compat.md §6): whatever the
umask, everything cxxrun creates in the run directory is private to the job's
user (0700 directories, 0600 files, as torchrun's mkdtemp), so another local
user can neither read it, plant a link in it, nor change the Python hook every
worker executes; and the hang stack dump never kills a worker, runs its own
handler, or writes into a descriptor the hook no longer holds, under the
forked default and spawn alike (agent/process/private_files.h, agent/hang/stack_hook.h)."""
import contextlib
import ctypes
import glob
import os
import pwd
import select
import signal
import stat
import struct
import subprocess
import time
import unittest

from harness import CXXRUN, TempDirTest, clean_env, run, start, end, wait_for

try:
    NOBODY = pwd.getpwnam("nobody").pw_uid
except KeyError:
    NOBODY = None

# Waits (bounded) for the test to say go, printing a line first and
# appending to a filter's file; a beating worker is never hung.
WAITING = """
import os, sys, time
print("loss=1", flush=True)
go = sys.argv[1]
for _ in range(1200):
    if os.path.exists(go):
        break
    time.sleep(0.05)
"""

# Waits for the test to say go, then starts a Python child, as a worker's
# DataLoader or subprocess does: the child reads the hook from PYTHONPATH.
STARTS_A_CHILD = """
import os, subprocess, sys, time
print("started", flush=True)
go = sys.argv[1]
for _ in range(1200):
    if os.path.exists(go):
        break
    time.sleep(0.05)
sys.exit(subprocess.run([sys.executable, "-c", "import cxxrun"]).returncode)
"""

# Every rank wedges with no progress, each after a different thing done to
# the stack signal or the hook's descriptor.
WEDGED = """
import ctypes, os, signal, sys, threading
rank = int(os.environ["RANK"])
sig = int(os.environ["CXXRUN_STACK_SIGNAL"])
if rank == 0:
    # The default action, set natively: the dump would end the worker.
    ctypes.CDLL(None).signal(sig, ctypes.c_void_p(0))
elif rank == 1:
    def handler(signum, frame):
        with open(sys.argv[1] + "/handler-ran", "a") as f:
            f.write("ran\\n")
    signal.signal(sig, handler)
elif rank == 2:
    # A daemon's idiom: close what was inherited, then open a data file.
    os.closerange(3, 65536)
    fd = os.open(sys.argv[1] + "/data", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, b"DATA")
    os.environ["DATA_FD"] = str(fd)
print("wedged", flush=True)
threading.Event().wait()
"""


def as_user(uid, action):
    """Runs `action()` in a child with another uid; returns what it raised
    (an exception's class name) or "ok"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
            said = b"ok"
        except Exception as e:
            said = type(e).__name__.encode()
        os.write(w, said)
        os._exit(0)
    os.close(w)
    said = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return said


def not_private(root):
    """Entries under `root` (itself included) that are not a 0700 directory
    or a 0600 file."""
    found = []
    for path in [root] + [os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files]:
        st = os.lstat(path)
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            found.append(f"{path} {oct(stat.S_IMODE(st.st_mode))}")
    return found


def guardians_of(pid):
    """The agent `pid`'s guardian process (agent/process/guardian.h), as a list."""
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return found
    for child in children:
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() == "cxxrun-guardian":
                    found.append(child)
        except OSError:
            pass
    return found


def dead(pid):
    """True once `pid` is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@contextlib.contextmanager
def made_in(directory):
    """Yields made(prefix, timeout): returns, woken by inotify, as soon as an
    entry whose name starts with `prefix` is created in `directory`, so that a
    test can act at that very moment rather than at its next poll."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(directory), 0x100) < 0:  # IN_CREATE
        raise OSError(ctypes.get_errno(), f"inotify on {directory}")

    def made(prefix, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            while data:
                length = struct.unpack_from("iIII", data)[3]
                name = data[16:16 + length].rstrip(b"\0").decode()
                data = data[16 + length:]
                if name.startswith(prefix):
                    return name
        raise AssertionError(f"timed out after {timeout}s waiting for {prefix}* in {directory}")

    try:
        yield made
    finally:
        os.close(fd)


def owned_by(pid):
    """The temporary directories agent `pid` made and left, wherever the
    agent may make them: each is named <prefix><pid namespace>-<pid>-<start
    time>-<random> (agent/process/stale_temp_dirs.h)."""
    found = set()
    for base in (clean_env()["TMPDIR"], "/tmp", "/dev/shm"):
        for prefix in ("cxxrun-hook-", "cxxrun-forkserver-", "cxxrun_heartbeat_", "cxxrun_timer_"):
            for d in glob.glob(os.path.join(base, prefix + "*")):
                fields = os.path.basename(d)[len(prefix):].split("-")
                if len(fields) == 4 and fields[1] == str(pid):
                    found.add(d)
    return found


class SharedMachine(TempDirTest):
    def shared_log_dir(self):
        # A world-writable, sticky --log-dir another user can reach.
        os.chmod(self.dir, 0o755)
        logs = os.path.join(self.dir, "shared")
        os.mkdir(logs)
        os.chmod(logs, 0o1777)
        return logs

    def run_with_umask(self, mask, args, **kwargs):
        old = os.umask(mask)
        try:
            return run(args, **kwargs)
        finally:
            os.umask(old)

    @unittest.skipUnless(os.geteuid() == 0 and NOBODY is not None, "needs root and a user 'nobody'")
    def test_another_user_cannot_change_the_hook_or_plant_links_under_umask_000(self):
        logs = self.shared_log_dir()
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WAITING)
        go = os.path.join(self.dir, "go")
        old = os.umask(0)
        try:
            p = start(["--nproc-per-node=1", "--redirects=3", f"--log-dir={logs}", script, go])
        finally:
            os.umask(old)
        try:
            wait_for(lambda: glob.glob(os.path.join(logs, "*", "attempt_0", "0", "stdout.log")), timeout=30,
                     what="the worker's log")
            run_dir = glob.glob(os.path.join(logs, "*"))[0]
            hook = os.path.join(run_dir, "python", "sitecustomize.py")
            self.assertTrue(os.path.exists(hook))

            def inject():
                with open(hook, "a") as f:
                    f.write("import os; os.system('touch /tmp/owned')\n")

            def plant():
                os.symlink("/tmp", os.path.join(run_dir, "attempt_0", "hang-0"))

            def read_log():
                with open(os.path.join(run_dir, "attempt_0", "0", "stdout.log")) as f:
                    f.read()

            self.assertEqual(as_user(NOBODY, inject), "PermissionError")
            self.assertEqual(as_user(NOBODY, plant), "PermissionError")
            self.assertEqual(as_user(NOBODY, read_log), "PermissionError")
            self.assertEqual(as_user(NOBODY, lambda: os.listdir(run_dir)), "PermissionError")
        finally:
            open(go, "w").close()
            try:
                p.wait(timeout=30)
            finally:
                end(p)
        self.assertEqual(p.returncode, 0)

    @unittest.skipUnless(os.geteuid() == 0 and NOBODY is not None, "needs root and a user 'nobody'")
    def test_a_log_dir_others_can_change_never_holds_what_workers_execute(self):
        # World-writable without the sticky bit: another user can move the
        # run directory aside and make one of their own, with a python/ of
        # their own, at its name.
        os.chmod(self.dir, 0o755)
        logs = os.path.join(self.dir, "open")
        os.mkdir(logs)
        os.chmod(logs, 0o777)
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(STARTS_A_CHILD)
        go = os.path.join(self.dir, "go")
        owned = os.path.join(logs, "owned")
        for method in ("forkserver", "spawn"):
            with self.subTest(start_method=method):
                for old in glob.glob(os.path.join(logs, "*")):
                    if os.path.isdir(old):
                        subprocess.run(["rm", "-rf", old], check=True)
                for leftover in (go, owned):
                    if os.path.exists(leftover):
                        os.unlink(leftover)
                p = start(["--nproc-per-node=1", "--redirects=3", f"--start-method={method}",
                           f"--log-dir={logs}", script, go])
                try:
                    wait_for(lambda: glob.glob(os.path.join(logs, "*", "attempt_0", "0", "stdout.log")), timeout=30,
                             what="the worker's log")
                    run_dir = glob.glob(os.path.join(logs, "*"))[0]

                    def replace():
                        os.rename(run_dir, run_dir + ".aside")
                        os.makedirs(os.path.join(run_dir, "python", "cxxrun"))
                        for module in ("sitecustomize.py", "cxxrun/__init__.py"):
                            with open(os.path.join(run_dir, "python", module), "w") as f:
                                f.write(f"open({owned!r}, 'w').write(str(__import__('os').getuid()))\n")

                    self.assertEqual(as_user(NOBODY, replace), "ok")
                finally:
                    open(go, "w").close()
                    try:
                        _, err = p.communicate(timeout=60)
                    finally:
                        end(p)
                self.assertFalse(os.path.exists(owned), "a worker's child ran another user's sitecustomize")
                # The hook is still there for the workers, elsewhere, and
                # gone with the job.
                self.assertEqual(p.returncode, 0, err)
                self.assertEqual(glob.glob(os.path.join(clean_env()["TMPDIR"], "cxxrun-hook-*")), [])

    def test_the_hooks_own_directory_goes_with_an_agent_killed_by_sigkill(self):
        os.chmod(self.dir, 0o755)
        logs = os.path.join(self.dir, "open")
        os.mkdir(logs)
        os.chmod(logs, 0o777)  # others can replace the run directory: the hook is kept elsewhere
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WAITING)
        tmpdir = clean_env()["TMPDIR"]
        hooks = os.path.join(tmpdir, "cxxrun-hook-*")
        # Killed while the job runs, and killed the moment the directory is
        # made, before the agent has written the hook into it (three times:
        # an agent that made it before it started the guardian got there
        # first about one time in ten): the guardian makes it, so that no
        # moment exists when it is there and the guardian does not know it.
        for when in ("running", "made", "made", "made"):
            with self.subTest(killed=when):
                before = set(glob.glob(hooks))
                with made_in(tmpdir) as made:
                    p = start(["--nproc-per-node=1", "--redirects=3", f"--log-dir={logs}", script,
                               os.path.join(self.dir, "go")])
                    try:
                        if when == "running":
                            wait_for(lambda: glob.glob(os.path.join(logs, "*", "attempt_0", "0", "stdout.log")),
                                     timeout=60, what="the worker's log")
                        else:
                            made("cxxrun-hook-", timeout=60)
                        os.kill(p.pid, signal.SIGKILL)
                        p.wait(timeout=30)
                        # The guardian removes it once the agent is gone.
                        wait_for(lambda: not set(glob.glob(hooks)) - before, timeout=60,
                                 what="the hook's directory to go")
                    finally:
                        end(p)

    def test_the_next_agent_removes_the_temporary_directories_of_one_killed_with_its_guardian(self):
        # A scheduler's SIGKILL of the whole step (Slurm past KillWait) takes
        # the guardian too: nothing is left to remove the hook's directory,
        # or the forkserver's, but the next agent's start.
        os.chmod(self.dir, 0o755)
        logs = os.path.join(self.dir, "open")
        os.mkdir(logs)
        os.chmod(logs, 0o777)  # others can replace the run directory: the hook is kept in TMPDIR
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WAITING)
        go = os.path.join(self.dir, "go")
        hooks = os.path.join(clean_env()["TMPDIR"], "cxxrun-hook-*")
        before = set(glob.glob(hooks))
        p = start(["--nproc-per-node=1", "--redirects=3", f"--log-dir={logs}", script, go])
        guardian = []
        try:
            wait_for(lambda: glob.glob(os.path.join(logs, "*", "attempt_0", "0", "stdout.log")), timeout=60,
                     what="the worker's log")
            wait_for(lambda: guardian.extend(guardians_of(p.pid)) or guardian, timeout=20, what="the guardian")
            left = set(glob.glob(hooks)) - before
            self.assertEqual(len(left), 1, left)

            os.kill(guardian[0], signal.SIGKILL)  # first, or it removes the directory
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            wait_for(lambda: dead(guardian[0]), timeout=30, what="the guardian to die")
            self.assertEqual(set(glob.glob(hooks)) - before, left, "the killed guardian removed it after all")
            self.assertEqual(owned_by(p.pid), left)
        finally:
            open(go, "w").close()  # the orphaned worker ends
            end(p)
        rc, _, err = run(["--nproc-per-node=1", f"--log-dir={logs}", script, go], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertFalse(left & set(glob.glob(hooks)), "the next agent left the dead agent's hook directory")
        self.assertEqual(owned_by(p.pid), set(), "the next agent left the dead agent's temporary directories")
        self.assertRegex(err, r"removed [1-9]\d* temporary directories left by agents that are gone")

    def test_the_next_agent_removes_the_heartbeat_pages_of_one_killed_with_its_guardian(self):
        # Without a run directory the heartbeat pages go to a temporary
        # directory of their own, which the guardian never knew of: an agent
        # SIGKILLed left it for good.
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WAITING)
        go = os.path.join(self.dir, "go")
        p = start(["--nproc-per-node=1", "--log-dir=/dev/null", script, go])
        guardian, made = [], set()
        try:
            wait_for(lambda: made.update(owned_by(p.pid)) or any(
                os.path.basename(d).startswith("cxxrun_heartbeat_") for d in made), timeout=60,
                what="the heartbeat pages' directory")
            wait_for(lambda: guardian.extend(guardians_of(p.pid)) or guardian, timeout=20, what="the guardian")
            os.kill(guardian[0], signal.SIGKILL)
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            wait_for(lambda: dead(guardian[0]), timeout=30, what="the guardian to die")
            left = owned_by(p.pid)
            self.assertTrue(any(os.path.basename(d).startswith("cxxrun_heartbeat_") for d in left), left)
        finally:
            open(go, "w").close()  # the orphaned worker ends
            end(p)
        rc, _, err = run(["--nproc-per-node=1", "--log-dir=/dev/null", script, go], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertEqual(owned_by(p.pid), set(), "the next agent left the dead agent's temporary directories")
        self.assertRegex(err, r"removed [1-9]\d* temporary directories left by agents that are gone")

    def test_everything_in_the_run_directory_is_private_whatever_the_umask(self):
        script = os.path.join(self.dir, "wedge.py")
        with open(script, "w") as f:
            f.write("import threading\nprint('loss=1', flush=True)\nthreading.Event().wait()\n")
        for mask, method in ((0o000, "forkserver"), (0o022, "spawn")):
            with self.subTest(umask=oct(mask), start_method=method):
                logs = os.path.join(self.dir, f"logs-{method}")
                events = os.path.join(self.dir, f"events-{method}.jsonl")
                # Redirected and tee'd logs, a filter's file, heartbeat pages,
                # the hook, every rank's stacks and a hang bundle.
                rc, out, err = self.run_with_umask(
                    mask, ["--nproc-per-node=2", f"--start-method={method}", "--hang-timeout=2",
                           "--heartbeat-timeout=600", "--redirects=1", "--tee=2",
                           "--duplicate-stderr-filters=loss", f"--log-dir={logs}", f"--event-log={events}",
                           script], timeout=60)
                self.assertEqual(rc, 240, err)
                run_dir = glob.glob(os.path.join(logs, "*"))[0]
                self.assertTrue(glob.glob(os.path.join(run_dir, "attempt_0", "hang-0", "rank-1.txt")), err)
                self.assertTrue(os.path.exists(os.path.join(run_dir, "attempt_0", "0", "stacks.txt")), err)
                self.assertTrue(os.path.exists(os.path.join(run_dir, "python", "sitecustomize.py")), err)
                self.assertEqual(not_private(run_dir), [])
                self.assertEqual(stat.S_IMODE(os.stat(events).st_mode), 0o600)


class StackSignal(TempDirTest):
    def test_the_dump_never_kills_runs_a_handler_or_writes_into_a_data_file(self):
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WEDGED)
        for method in ("forkserver", "spawn"):
            with self.subTest(start_method=method):
                work = os.path.join(self.dir, method)
                os.mkdir(work)
                logs = os.path.join(work, "logs")
                rc, out, err = run(["--nproc-per-node=3", f"--start-method={method}", "--hang-timeout=2",
                                    f"--log-dir={logs}", script, work], timeout=60)
                self.assertEqual(rc, 240, err)
                self.assertNotIn("not sent by cxxrun", err)
                self.assertIn("killed-by-cxxrun: the hang watchdog", err)
                self.assertFalse(os.path.exists(os.path.join(work, "handler-ran")), err)
                with open(os.path.join(work, "data"), "rb") as f:
                    self.assertEqual(f.read(), b"DATA")
                bundle = glob.glob(os.path.join(logs, "*", "attempt_0", "hang-0"))[0]
                for rank in range(3):
                    with open(os.path.join(bundle, f"rank-{rank}.txt")) as f:
                        # Read from outside: eu-stack's threads, or its absence said.
                        self.assertRegex(f.read(), r"TID \d+|eu-stack not found", f"rank {rank}")

    def test_the_stack_reader_is_never_a_program_planted_in_the_cwd(self):
        # PATH with an empty entry (the cwd), a common slip ('PATH=$PATH:'),
        # and a cwd others can write: what cxxrun runs of its own accord at a
        # hang is the system's eu-stack, never theirs.
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write(WEDGED)
        cwd = os.path.join(self.dir, "shared")
        os.mkdir(cwd)
        os.chmod(cwd, 0o777)
        planted = os.path.join(self.dir, "planted-ran")
        for name in ("eu-stack", "timeout"):
            with open(os.path.join(cwd, name), "w") as f:
                f.write(f"#!/bin/sh\necho {name} >> {planted}\n")
            os.chmod(os.path.join(cwd, name), 0o755)
        # The cwd by an empty entry, then by its name: a directory others
        # can write is no place to take a program from either.
        for first in ("", cwd):
            with self.subTest(first_path_entry=first):
                if os.path.exists(planted):
                    os.unlink(planted)
                env = clean_env()
                env["PATH"] = first + ":" + env.get("PATH", "/usr/bin:/bin")
                logs = os.path.join(self.dir, f"logs{len(first)}")
                p = subprocess.run([CXXRUN, "--nproc-per-node=1", "--hang-timeout=2", f"--log-dir={logs}", script,
                                    self.dir], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 240, p.stderr)
                self.assertFalse(os.path.exists(planted), "cxxrun ran a program planted in its cwd")
                bundle = glob.glob(os.path.join(logs, "*", "attempt_0", "hang-0"))[0]
                with open(os.path.join(bundle, "rank-0.txt")) as f:
                    self.assertRegex(f.read(), r"TID \d+|eu-stack not found")


if __name__ == "__main__":
    unittest.main()
