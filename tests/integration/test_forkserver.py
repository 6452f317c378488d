"""--start-method=forkserver and --preload: a Python worker forked from the
job's zygote must look to its code exactly like one started by exec
(spawn), a restart forks from the same zygote without importing again, an
unsafe or dead zygote means exec with one log line, and containment, stdio
and the failure summary work unchanged.

Most tests preload a tiny module of their own (on PYTHONPATH in the test's
directory) instead of torch, to stay fast; a forked worker finds it in
sys.modules at start, an exec'd one does not.
"""
import os
import re
import shutil
import signal
import subprocess
import threading
import zipfile

from harness import (CXXRUN, TORCH_PYTHON, OrphanCheckTest, alive, clean_env, end, run, start,
                     torch_importable, wait_for, with_marker)

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../agent/python/zygote.py")


def kernel_shows_forked_workers():
    """Whether this kernel lets a forked worker point /proc at its own
    command and environment (the zygote's _show_as_worker: PR_SET_MM_MAP,
    which a kernel without checkpoint/restore or a seccomp filter refuses).
    Asked in a child, with the zygote's own code."""
    code = ("import ctypes, os, sys\n"
            f"src = open({ZYGOTE!r}).read()\n"
            "ns = {'ctypes': ctypes, 'os': os}\n"
            "exec(src[src.index('_PR_SET_MM, '):src.index('# --numa-binding')], ns)\n"
            "ns['_show_as_worker'](ctypes.CDLL(None, use_errno=True), ['probe'], ['A=1'])\n"
            "sys.exit(0 if open('/proc/self/cmdline', 'rb').read() == b'probe\\0' else 1)\n")
    return subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, timeout=60).returncode == 0


STARTED = re.compile(r"forkserver: started \S+ \(pid (\d+)\), preloading")
CGROUP = re.compile(r"containment: the job's processes live in cgroup (\S+)")

# Everything a script can see of how it was started, one "key value" line
# each; values that differ from run to run (ports, run ids) only as their
# shape. The parent's name says the agent supervises the worker directly.
PROBE = r'''
import os, sys
def show(key, value):
    print(key, repr(value))
show("argv", sys.argv)
show("orig_argv", sys.orig_argv)
show("name", __name__)
show("file", globals().get("__file__", "<none>"))
show("cached", globals().get("__cached__", "<none>"))
show("loader", type(globals().get("__loader__")).__name__)
show("spec", __spec__.name if __spec__ else None)
show("main", sorted(vars(sys.modules["__main__"])))
# cxxrun's hook directory (agent/python/hook.h) is in each run's own log dir.
show("path", ["<cxxrun hook>" if os.path.isfile(os.path.join(p, "cxxrun", "__init__.py")) else p for p in sys.path])
# cxxrun's hook registered this process's stack dump (it names the pid in
# the stack file); `import sitecustomize` gives the one it shadows.
show("stack hook", str(os.getpid()) in open(os.environ["CXXRUN_STACK_FILE"]).read())
show("sitecustomize", getattr(__import__("sitecustomize"), "__file__", None))
show("fds", sorted(os.listdir("/proc/self/fd")))  # nothing of the zygote's left open
show("cwd", os.getcwd())
show("stdout", (sys.stdout.write_through, sys.stdout.line_buffering, sys.stdout.encoding))
show("stderr", (sys.stderr.write_through, sys.stderr.line_buffering))
show("flags", sys.flags)
show("tty", (os.isatty(0), os.isatty(1), os.isatty(2)))
show("session leader", os.getsid(0) == os.getpid())
show("parent", open(f"/proc/{os.getppid()}/comm").read().strip())
volatile = ("MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "CXXRUN_JOB_TOKEN", "CXXRUN_STACK_FILE",
            "CXXRUN_HEARTBEAT_FILE")
show("env", sorted((k, "<set>" if k in volatile else v) for k, v in os.environ.items()
                   if k.startswith(("TORCHELASTIC_", "MASTER_", "CXXRUN_")) or k in ("RANK", "LOCAL_RANK",
                   "WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")))
show("error file", os.environ["TORCHELASTIC_ERROR_FILE"].split("/")[-3:])
# What ps and tools that find ranks by their environment see from outside.
show("proc cmdline", open("/proc/self/cmdline", "rb").read().split(b"\0")[:-1])
proc_env = dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read().split(b"\0") if b"=" in e)
show("proc environ", [(k, proc_env.get(k.encode(), b"").decode() == os.environ[k])
                      for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "CXXRUN_JOB_TOKEN")])
'''

# How a script ends, chosen by its first argument.
ENDINGS = r'''
import sys
def fail(how):
    if how == "raise":
        raise ValueError("boom")
    if how == "system_exit":
        raise SystemExit("a message")
    if how == "exit3":
        sys.exit(3)
    if how == "interrupt":
        raise KeyboardInterrupt
fail(sys.argv[1])
'''


class Forkserver(OrphanCheckTest):
    def setUp(self):
        super().setUp()
        self.lib = os.path.join(self.dir, "lib")
        os.mkdir(self.lib)
        # The preload marker: each import appends its process's pid.
        self.module("fsmark", f"import os\nwith open({self.dir + '/imports'!r}, 'a') as f:\n"
                              "    f.write(f'{os.getpid()}\\n')\n")

    def module(self, name, body):
        path = os.path.join(self.lib, *name.split("."))
        if "." in name:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".py", "w") as f:
            f.write(body)

    def py(self, name, body):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(body)
        return path

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def env(self, **extra):
        return clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.lib, **extra)

    def job(self, args, method="forkserver", preload="fsmark", env=None, nproc=2, timeout=60):
        opts = ["--standalone", f"--nproc-per-node={nproc}", f"--start-method={method}"]
        if preload is not None:
            opts.append(f"--preload={preload}")
        return run(opts + list(args), env=env or self.env(), timeout=timeout)

    def assert_forked(self, err):
        self.assertEqual(len(STARTED.findall(err)), 1, err)
        self.assertIn("forkserver: ready in", err)
        self.assertNotIn("by exec", err)

    # 1. The same behaviour as spawn.
    def test_a_forked_worker_sees_what_an_execd_one_sees(self):
        script = self.py("probe.py", PROBE)
        self.module("probemod", PROBE)
        os.mkdir(f"{self.dir}/app")
        self.py("app/__main__.py", PROBE)
        with zipfile.ZipFile(f"{self.dir}/app.zip", "w") as z:
            z.writestr("__main__.py", PROBE)
        # Relative, as users type them: Python makes __file__ and sys.path[0]
        # absolute.
        entries = {"script": [os.path.relpath(script), "a", "--b"], "module": ["-m", "probemod", "x"],
                   "run-path": ["--run-path", script, "y"],
                   "no .py": [os.path.relpath(self.py("probe", PROBE))],
                   "directory": [os.path.relpath(f"{self.dir}/app"), "z"],
                   "zip": [os.path.relpath(f"{self.dir}/app.zip")]}
        shown = kernel_shows_forked_workers()
        if not shown:
            print("\nthis kernel refuses PR_SET_MM_MAP: /proc shows forked workers as the zygote", flush=True)
        for entry, args in entries.items():
            with self.subTest(entry=entry):
                outs = {}
                for method in ("spawn", "forkserver"):
                    rc, out, err = self.job(args, method, preload="" if method == "forkserver" else None)
                    self.assertEqual(rc, 0, err)
                    outs[method] = sorted(line for line in out.splitlines() if shown or ":proc " not in line)
                    if method == "forkserver":
                        self.assert_forked(err)
                self.assertEqual(outs["forkserver"], outs["spawn"])
                self.assertIn("[default1]:parent 'cxxrun'", outs["spawn"])
                self.assertIn("[default0]:stack hook True", outs["spawn"])
                self.assertIn("[default0]:session leader True", outs["spawn"])
                if shown:
                    self.assertIn("[default0]:proc environ [('RANK', True), ('LOCAL_RANK', True), "
                                  "('WORLD_SIZE', True), ('CXXRUN_JOB_TOKEN', True)]", outs["spawn"])

    def test_an_uncaught_exception_or_exit_ends_a_worker_as_under_spawn(self):
        script = self.py("ends.py", ENDINGS)
        self.module("endsmod", ENDINGS)
        expected = {"raise": (1, "exitcode  : 1 "), "system_exit": (1, "exitcode  : 1 "),
                    "exit3": (3, "exitcode  : 3 "), "interrupt": (130, "exitcode  : -2 (SIGINT)")}
        for how, (code, summary) in expected.items():
            for entry in (["-m", "endsmod"], [os.path.relpath(script)]):
                with self.subTest(how=how, entry="module" if entry[0] == "-m" else "script"):
                    seen = {}
                    for method in ("spawn", "forkserver"):
                        rc, out, err = self.job(entry + [how], method, preload="" if method == "forkserver" else None,
                                                nproc=1)
                        self.assertEqual(rc, code, err)
                        self.assertIn(summary, err)
                        if method == "forkserver":
                            self.assert_forked(err)
                        seen[method] = [l for l in err.splitlines() if l.startswith("[default0]:")]
                    self.assertEqual(seen["forkserver"], seen["spawn"])
                    if how == "system_exit":
                        self.assertEqual(seen["forkserver"], ["[default0]:a message"])
                    if how in ("raise", "interrupt"):
                        trace = seen["forkserver"]
                        self.assertEqual(trace[0], "[default0]:Traceback (most recent call last):")
                        user = [l for l in trace if l.startswith("[default0]:  File ")]
                        first = 2 if entry[0] == "-m" else 0  # runpy's own frames come first
                        self.assertTrue(all("<frozen runpy>" in l for l in user[:first]), trace)
                        # Python joins the cwd to a relative script path without normalising it.
                        where = (os.path.join(self.lib, "endsmod.py") if entry[0] == "-m" else
                                 os.path.join(os.getcwd(), entry[0]))
                        self.assertIn(where, user[first], trace)
                        self.assertNotIn("<string>", "\n".join(trace))

    # 2. A restart forks from the same zygote: no new interpreter, no import.
    def test_a_restart_forks_from_the_same_zygote(self):
        worker = self.py("w.py", """import os, sys
print("preloaded", "fsmark" in sys.modules, os.environ["TORCHELASTIC_RESTART_COUNT"])
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["LOCAL_RANK"] == "0":
    sys.exit(4)
""")
        rc, out, err = self.job(["--max-restarts=1", worker])
        self.assertEqual(rc, 0, err)
        self.assertIn("restarting, attempt 1 of 1", err)
        self.assert_forked(err)
        self.assertIn("[default0]:preloaded True 0", out.splitlines())
        self.assertEqual(sorted(l for l in out.splitlines() if l.endswith(" 1")),
                         ["[default0]:preloaded True 1", "[default1]:preloaded True 1"])
        self.assertEqual(self.read("imports").split(), STARTED.findall(err), "imported once, by the zygote")

    # 3. A zygote unsafe to fork: every attempt starts by exec, one line each.
    def test_a_zygote_with_a_thread_makes_every_attempt_exec(self):
        self.module("threaded", "import threading, time\n"
                                "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
        worker = self.py("w.py", """import os, sys
print("preloaded", "threaded" in sys.modules, os.environ["TORCHELASTIC_RESTART_COUNT"])
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["LOCAL_RANK"] == "0":
    sys.exit(4)
""")
        rc, out, err = self.job(["--max-restarts=1", worker], preload="threaded")
        self.assertEqual(rc, 0, err)
        self.assertIn("forkserver: ready in", err)
        for attempt in (0, 1):
            self.assertEqual(err.count(f"the forkserver has 2 threads; attempt {attempt} starts its workers by exec"),
                             1, err)
        self.assertEqual(err.count("starts its workers by exec"), 2, err)
        self.assertIn("[default0]:preloaded False 0", out.splitlines())
        self.assertEqual(sorted(l for l in out.splitlines() if l.endswith(" 1")),
                         ["[default0]:preloaded False 1", "[default1]:preloaded False 1"])

    def test_a_zygote_that_initialised_cuda_makes_the_attempt_exec(self):
        # A stand-in for torch whose CUDA says it is initialised.
        self.module("torch.cuda.__init__", "def is_initialized():\n    return True\n")
        self.module("torch.__init__", "from . import cuda\n")
        worker = self.py("w.py", 'import sys\nprint("preloaded", "torch" in sys.modules)\n')
        rc, out, err = self.job([worker], preload="torch")
        self.assertEqual(rc, 0, err)
        self.assertIn("(preloaded: torch)", err)
        self.assertEqual(err.count("the forkserver has initialised CUDA; attempt 0 starts its workers by exec"), 1, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:preloaded False", "[default1]:preloaded False"])

    # 4. The zygote dies in its preload: exec, said once.
    def test_a_zygote_that_dies_in_its_preload_means_exec(self):
        self.module("dies", "import os\nos._exit(3)\n")
        worker = self.py("w.py", 'import sys\nprint("preloaded", "dies" in sys.modules)\n')
        rc, out, err = self.job([worker], preload="dies")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("forkserver: ready", err)
        # "failed: it closed its socket" or "exited with code 3", whichever
        # the agent sees first.
        self.assertEqual(err.count("workers start by exec from now on"), 1, err)
        self.assertEqual(err.count("by exec"), 1, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:preloaded False", "[default1]:preloaded False"])

    # The zygote dies while attempt 0 runs: later attempts start by exec.
    def test_after_the_zygote_dies_workers_start_by_exec(self):
        go = f"{self.dir}/go"
        worker = self.py("w.py", f"""import os, sys, time
print("preloaded", "fsmark" in sys.modules, os.environ["TORCHELASTIC_RESTART_COUNT"], flush=True)
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    for _ in range(600):
        if os.path.exists({go!r}):
            break
        time.sleep(0.05)
    sys.exit(4 if os.environ["LOCAL_RANK"] == "0" else 0)
""")
        p = start(["--standalone", "--nproc-per-node=2", "--start-method=forkserver", "--preload=fsmark",
                   "--max-restarts=1", worker], env=self.env())
        out, err = [], []
        readers = [threading.Thread(target=lambda s=s, l=l: l.extend(iter(s.readline, "")), daemon=True)
                   for s, l in ((p.stdout, out), (p.stderr, err))]
        for r in readers:
            r.start()
        try:
            wait_for(lambda: STARTED.search("".join(err)), timeout=20, what="the forkserver's start line")
            zygote = int(STARTED.search("".join(err)).group(1))
            wait_for(lambda: sum("preloaded True 0" in l for l in out) == 2, timeout=20,
                     what="both workers of attempt 0, forked")
            os.kill(zygote, signal.SIGKILL)  # our job's zygote
            gone = f"the forkserver was killed by SIGKILL (pid {zygote}); workers start by exec from now on"
            wait_for(lambda: gone in "".join(err), timeout=20, what="the agent to notice the zygote's death")
            open(go, "w").close()
            self.assertEqual(p.wait(timeout=30), 0, "".join(err))
            for r in readers:
                r.join(timeout=10)
        finally:
            end(p)
        self.assertIn("restarting, attempt 1 of 1", "".join(err))
        self.assertEqual(sorted(l.strip() for l in out if l.strip().endswith(" 1")),
                         ["[default0]:preloaded False 1", "[default1]:preloaded False 1"])

    # 5. Containment: a forked worker is in its attempt's cgroup before its
    # code runs, and nothing of the job outlives it, the zygote included.
    def test_nothing_a_forked_worker_starts_outlives_the_job(self):
        worker = self.py("w.py", f"""import os, subprocess, sys
print("preloaded", "fsmark" in sys.modules)
with open("/proc/self/cgroup") as f:
    print("cgroup", [l.split(":", 2)[2] for l in f.read().splitlines() if l.startswith("0::")][0])
child = subprocess.Popen(["setsid", "sleep", "300", {self.marker!r}])
with open(f"{self.dir}/child.{{os.environ['LOCAL_RANK']}}", "w") as f:
    f.write(str(child.pid))
""")
        for mode in ("auto", "subreaper"):
            with self.subTest(mode=mode):
                rc, out, err = self.job([worker], env=self.env(CXXRUN_CONTAINMENT=mode))
                self.assertEqual(rc, 0, err)
                self.assert_forked(err)
                self.assertEqual(sorted(l for l in out.splitlines() if "preloaded" in l),
                                 ["[default0]:preloaded True", "[default1]:preloaded True"])
                children = [int(self.read(f"child.{r}")) for r in (0, 1)]
                self.assertEqual([pid for pid in children if alive(pid)], [], err)
                self.assertEqual(with_marker(self.marker), [], err)
                self.assertFalse(alive(int(STARTED.search(err).group(1))), "the zygote outlived the job")
                cgroup = CGROUP.search(err)
                if mode == "subreaper":
                    self.assertIsNone(cgroup, err)
                    continue
                if os.geteuid() != 0 or cgroup is None:
                    self.skipTest("needs root and a writable cgroup v2 for the cgroup check: " + err)
                for line in (l for l in out.splitlines() if ":cgroup " in l):
                    path = line.split(":cgroup ", 1)[1]
                    self.assertTrue(path.endswith("/attempt-0"), line)
                    self.assertTrue(cgroup.group(1).endswith(path[:-len("/attempt-0")]), (line, cgroup.group(1)))

    def test_a_killed_agent_takes_the_zygote_and_its_forked_workers_along(self):
        worker = self.py("w.py", f"""import os, time
open(f"{self.dir}/up.{{os.getpid()}}", "w").close()
time.sleep(300)
""")
        # No cgroup to kill: the death signals (the worker's, set once the
        # agent is its parent, and the zygote's) and the guardian end them.
        p = start(["--standalone", "--nproc-per-node=2", "--start-method=forkserver", "--preload=fsmark",
                   worker], env=self.env(CXXRUN_CONTAINMENT="subreaper"))
        workers, zygote = [], None
        try:
            wait_for(lambda: len([n for n in os.listdir(self.dir) if n.startswith("up.")]) == 2, timeout=20,
                     what="both workers")
            workers = [int(n[3:]) for n in os.listdir(self.dir) if n.startswith("up.")]
            p.kill()
            p.wait(timeout=10)
            err = p.stderr.read()
            zygote = int(STARTED.search(err).group(1))
            wait_for(lambda: not any(alive(pid) for pid in workers + [zygote]), timeout=10,
                     what="the zygote and the workers to die with the agent")
        finally:
            end(p)
            for pid in workers + ([zygote] if zygote else []):
                if alive(pid):  # this job's, left by a failure above
                    os.kill(pid, signal.SIGKILL)

    def test_ctrl_c_stops_forked_workers_even_under_a_parent_that_ignores_it(self):
        # A shell's `cxxrun ... &` starts cxxrun with SIGINT and SIGQUIT
        # ignored, nohup with SIGHUP ignored. The agent catches what it
        # forwards, so a worker it execs starts with the default actions; a
        # forked one must too, or it ignores the Ctrl-C the agent forwards.
        worker = self.py("w.py", f"""import os, signal, sys, time
names = ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM")
print("preloaded", "fsmark" in sys.modules)
print("signals", [str(signal.getsignal(getattr(signal, n))) for n in names], flush=True)
open(f"{self.dir}/up.{{os.environ['LOCAL_RANK']}}", "w").close()
time.sleep(60)
""")
        ignored = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)

        def ignore():
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)

        seen = {}
        for method in ("spawn", "forkserver"):
            with self.subTest(method=method):
                for name in os.listdir(self.dir):
                    if name.startswith("up."):
                        os.remove(os.path.join(self.dir, name))
                preload = ["--preload=fsmark"] if method == "forkserver" else []
                p = subprocess.Popen([CXXRUN, "--standalone", "--nproc-per-node=2", f"--start-method={method}"]
                                     + preload + [worker],
                                     env=self.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
                try:
                    wait_for(lambda: len([n for n in os.listdir(self.dir) if n.startswith("up.")]) == 2,
                             timeout=20, what="both workers")
                    p.send_signal(signal.SIGINT)
                    try:
                        out, err = p.communicate(timeout=20)
                    except subprocess.TimeoutExpired:
                        # The agent would wait out its 30 s grace, then kill them.
                        self.fail("the workers ignored the SIGINT the agent forwarded")
                finally:
                    end(p)
                self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
                self.assertNotIn("did not stop within", err)
                seen[method] = sorted(l for l in out.splitlines() if ":signals " in l)
                self.assertIn("preloaded " + ("True" if method == "forkserver" else "False"), out)
        if len(seen) < 2:
            return  # a subtest failed
        self.assertEqual(seen["forkserver"], seen["spawn"])
        self.assertIn("default_int_handler", seen["spawn"][0])
        self.assertNotIn("SIG_IGN", "".join(seen["spawn"]))

    # 6. stdio: stdin reaches a forked worker, its output the right stream.
    def test_stdin_and_the_output_streams_of_forked_workers(self):
        worker = self.py("io.py", """import os, sys
rank = os.environ["LOCAL_RANK"]
print("preloaded", "fsmark" in sys.modules)
if rank == "0":
    print("read", repr(sys.stdin.readline()))
print("out from", rank)
print("err from", rank, file=sys.stderr)
""")
        opts = ["--standalone", "--nproc-per-node=2", "--start-method=forkserver", "--preload=fsmark", worker]
        p = subprocess.run([CXXRUN] + opts, env=self.env(), input="hi\nthere\n", capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_forked(p.stderr)
        self.assertEqual(sorted(p.stdout.splitlines()),
                         ["[default0]:out from 0", "[default0]:preloaded True", "[default0]:read 'hi\\n'",
                          "[default1]:out from 1", "[default1]:preloaded True"])
        for r in (0, 1):
            self.assertIn(f"[default{r}]:err from {r}", p.stderr.splitlines())

        def logs(rank, stream):
            [path] = [os.path.join(d, f"{stream}.log") for d, _, files in os.walk(f"{self.dir}/logs")
                      if d.endswith(f"attempt_0/{rank}") and f"{stream}.log" in files]
            with open(path) as f:
                return f.read()

        for flag, console in (("--redirects=3", False), ("--tee=3", True)):
            with self.subTest(flag=flag):
                rc, out, err = self.job([flag, f"--log-dir={self.dir}/logs", worker])
                self.assertEqual(rc, 0, err)
                self.assert_forked(err)
                self.assertEqual("[default1]:out from 1" in out.splitlines(), console, out)
                self.assertEqual("[default1]:err from 1" in err.splitlines(), console, err)
                self.assertEqual(logs(1, "stdout"), "preloaded True\nout from 1\n")
                self.assertEqual(logs(1, "stderr"), "err from 1\n")
                self.assertEqual(logs(0, "stdout"), "preloaded True\nread ''\nout from 0\n")  # stdin: /dev/null
                shutil.rmtree(f"{self.dir}/logs")

    # 7. Bad input and settings that cannot take effect.
    def test_a_bad_preload_list_is_a_usage_error(self):
        for value in ("1bad", "torch,,x", "torch.2d"):
            with self.subTest(value=value):
                rc, out, err = self.job([self.py("w.py", "pass\n")], preload=value)
                self.assertEqual(rc, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(f"--preload={value}: '", err)
                self.assertIn("' is not a module name", err)

    def test_preload_without_forkserver_warns(self):
        rc, out, err = self.job([self.py("w.py", 'import sys\nprint("preloaded", "fsmark" in sys.modules)\n')],
                                method="spawn", preload="json", nproc=1)
        self.assertEqual(rc, 0, err)
        self.assertIn("--preload=json has no effect without --start-method=forkserver", err)
        self.assertNotIn("forkserver: started", err)
        self.assertEqual(out, "[default0]:preloaded False\n")

    def test_forkserver_with_a_native_program_warns_and_runs(self):
        rc, out, err = self.job(["--no-python", "/bin/echo", "native"], preload=None)
        self.assertEqual(rc, 0, err)
        self.assertIn("--start-method=forkserver: /bin/echo is not a Python program, so its workers start by exec",
                      err)
        self.assertNotIn("forkserver: started", err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:native", "[default1]:native"])

    def test_the_environment_chooses_forkserver_and_a_missing_module_is_named(self):
        worker = self.py("w.py", 'import sys\nprint("preloaded", "fsmark" in sys.modules)\n')
        rc, out, err = run(["--standalone", "--nproc-per-node=1", "--preload=fsmark,no_such_module_here", worker],
                           env=self.env(PET_START_METHOD="forkserver"))
        self.assertEqual(rc, 0, err)
        self.assertIn("cxxrun: forkserver: cannot preload no_such_module_here: ModuleNotFoundError", err)
        self.assertIn("(preloaded: fsmark; could not import: no_such_module_here)", err)
        self.assertEqual(out, "[default0]:preloaded True\n")

    def test_the_default_preload_is_torch(self):
        if not torch_importable("torch.distributed"):
            self.skipTest(f"{TORCH_PYTHON} cannot import torch.distributed")
        worker = self.py("w.py", 'import sys\nprint("preloaded", "torch.distributed" in sys.modules)\n')
        rc, out, err = self.job([worker], preload=None, timeout=120)
        self.assertEqual(rc, 0, err)
        self.assert_forked(err)
        self.assertIn("preloading torch,torch.distributed", err)
        self.assertIn("(preloaded: torch,torch.distributed)", err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:preloaded True", "[default1]:preloaded True"])
