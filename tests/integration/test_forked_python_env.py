"""A worker forked from the forkserver (the default for a script that imports
torch at its top level; agent/python/zygote.py) starts as an exec'd one does under
--start-method=spawn: sys.path by Python's own rules with the worker's
environment (PYTHONSAFEPATH, PYTHONPATH's order, the script's directory, the
cwd for -m, "" for -c), the user's sitecustomize and usercustomize run in
each worker with that worker's environment (never in the zygote with the
agent's), `import sitecustomize` giving the user's module, and a
multiprocessing authkey of its own.

A fake torch (which imports multiprocessing, as torch does) keeps it fast."""
import os
import subprocess

from harness import CXXRUN, FORKED, TORCH_PYTHON, TempDirTest, clean_env, run

PROBE = r'''
import os, sys
import torch
import multiprocessing, shadow, sitecustomize
def show(key, value):
    print(key, repr(value), flush=True)
def where(p):
    if p and os.path.isfile(os.path.join(p, "cxxrun", "__init__.py")):
        return "<cxxrun hook>"  # in each run's own log directory, or a private temporary one
    return p
show("path", [where(p) for p in sys.path])
show("shadow", shadow.__file__)
try:
    import cxxrun
    show("cxxrun", True)
except ImportError as e:
    show("cxxrun", repr(e))
show("sitecustomize", sitecustomize.__file__)
show("set by sitecustomize", os.environ.get("X"))
show("set by usercustomize", os.environ.get("Y"))
print("pid", os.environ["RANK"], os.getpid(), flush=True)
print("authkey", multiprocessing.current_process().authkey.hex(), flush=True)
print("forked", ''' + FORKED + r''', flush=True)
'''

# The fake torch: each import notes the PYTHONPATH its process would hand a
# Python process it starts (cxxrun's hook directory differs by run).
TORCH = r'''
import multiprocessing, os
path = ["<hook>" if os.path.isfile(os.path.join(p, "cxxrun", "__init__.py")) else p
        for p in os.environ.get("PYTHONPATH", "").split(":")]
with open({log!r}, "a") as f:
    f.write("%s %s\n" % (path, "CXXRUN_FORKSERVER_SITE" in os.environ))
'''

# Each run appends "<what> <pid> <RANK>" to the log: which processes ran it.
CUSTOMIZE = r'''
import os
os.environ[{var!r}] = "rank " + os.environ.get("RANK", "<none>")
with open({log!r}, "a") as f:
    f.write("{what} %d %s\n" % (os.getpid(), os.environ.get("RANK", "<none>")))
'''


class ForkedPythonEnv(TempDirTest):
    def setUp(self):
        super().setUp()
        d = self.dir
        self.log = os.path.join(d, "customized")
        # The script, with a module beside it that shadows the user's one.
        self.app = os.path.join(d, "app")
        self.script = self.write("app/probe.py", PROBE)
        self.write("app/shadow.py", "")
        # PYTHONPATH's two entries: the user's modules, sitecustomize and a
        # fake torch first.
        self.write("lib1/shadow.py", "")
        self.write("lib1/sitecustomize.py", CUSTOMIZE.format(var="X", log=self.log, what="site"))
        self.write("lib1/torch/__init__.py", TORCH.format(log=d + "/torch-imports"))
        self.write("lib1/torch/distributed.py", "")
        self.write("lib2/probemod.py", PROBE)
        self.python_path = f"{d}/lib1:{d}/lib2"
        self.user_base = os.path.join(d, "userbase")
        enabled, user_site = subprocess.run(
            [TORCH_PYTHON, "-c", "import site; print(site.ENABLE_USER_SITE, site.getusersitepackages())"],
            env=dict(os.environ, PYTHONUSERBASE=self.user_base), capture_output=True, text=True, timeout=60,
            check=True).stdout.split()
        self.customized = ("site", "user") if enabled == "True" else ("site",)
        self.write(os.path.relpath(os.path.join(user_site, "usercustomize.py"), d),
                   CUSTOMIZE.format(var="Y", log=self.log, what="user"))

    def write(self, name, body):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(body)
        return path

    def job(self, args, method, **env):
        """(the workers' lines but the volatile ones, {prefix: {pid, rank, authkey}}, {forked?}, the log)."""
        if os.path.exists(self.log):
            os.unlink(self.log)
        opts = ["--standalone", "--nproc-per-node=2"] + ([f"--start-method={method}"] if method else [])
        env = clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.python_path, PYTHONUSERBASE=self.user_base, **env)
        rc, out, err = run(opts + args, env=env)
        self.assertEqual(rc, 0, err)
        # The zygote's private site directory (agent/warm/zygote.h) is gone.
        self.assertEqual([n for n in os.listdir(env["TMPDIR"]) if n.startswith("cxxrun-forkserver-")], [])
        lines, ranks, forked = [], {}, set()
        for line in out.splitlines():
            prefix, _, rest = line.partition(":")
            key, _, value = rest.partition(" ")
            if key == "pid":
                rank, pid = value.split()
                ranks.setdefault(prefix, {}).update(rank=rank, pid=pid)
            elif key == "authkey":
                ranks.setdefault(prefix, {})["authkey"] = value
            elif key == "forked":
                forked.add(value)
            else:
                lines.append(line)
        log = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                log = sorted(f.read().splitlines())
        return sorted(lines), ranks, forked, log

    def check(self, args, forked_method, **env):
        spawn = self.job(args, "spawn", **env)
        forked = self.job(args, forked_method, **env)
        self.assertEqual(spawn[2], {"False"})
        self.assertEqual(forked[2], {"True"}, "the test needs forked workers")
        for lines, ranks, _, log in (spawn, forked):
            # Each worker ran sitecustomize and usercustomize with its own
            # RANK, and nothing else did (the zygote least of all).
            pids = [(v["pid"], v["rank"]) for v in ranks.values() if "pid" in v]
            self.assertEqual(len(pids), 2, lines)
            self.assertEqual(log, sorted(f"{what} {pid} {rank}" for pid, rank in pids for what in self.customized))
            self.assertIn("[default0]:set by sitecustomize 'rank 0'", lines)
            if "user" in self.customized:
                self.assertIn("[default1]:set by usercustomize 'rank 1'", lines)
            self.assertIn(f"[default0]:sitecustomize '{self.dir}/lib1/sitecustomize.py'", lines)
            keys = [v["authkey"] for v in ranks.values() if "authkey" in v]
            self.assertEqual(len(set(keys)), 2, f"the ranks share a multiprocessing authkey: {keys}")
        self.assertEqual(forked[0], spawn[0])
        # The zygote's imports too (its private site directory is gone from
        # what it would pass on).
        with open(os.path.join(self.dir, "torch-imports")) as f:
            seen = set(f.read().splitlines())
        os.unlink(os.path.join(self.dir, "torch-imports"))
        self.assertEqual(len(seen), 1, seen)
        return spawn[0]

    def test_a_forked_worker_gets_the_path_and_customizations_an_execd_one_gets(self):
        for safe in ("", "1"):
            for log_dir in ([], ["--log-dir=/dev/null"]):
                with self.subTest(PYTHONSAFEPATH=safe, log_dir=log_dir):
                    env = {"PYTHONSAFEPATH": safe} if safe else {}
                    lines = self.check(log_dir + [self.script], None, **env)
                    first = [] if safe else [self.app]
                    # The hook, and with it `import cxxrun`, with or without
                    # a log directory (then in a private temporary one).
                    hook = ["<cxxrun hook>"]
                    self.assertIn(f"[default0]:shadow '{(self.app if not safe else self.dir + '/lib1')}/shadow.py'",
                                  lines)
                    self.assertIn("[default1]:cxxrun True", lines)
                    path = [l for l in lines if l.startswith("[default0]:path ")][0]
                    self.assertTrue(path.startswith("[default0]:path " + repr(first + hook + [
                        f"{self.dir}/lib1", f"{self.dir}/lib2"])[:-1]), path)

    def test_module_and_run_path_entries_too(self):
        for safe in ("", "1"):
            for args in (["-m", "probemod"], ["--run-path", self.script]):
                with self.subTest(PYTHONSAFEPATH=safe, entry=args[0]):
                    env = {"PYTHONSAFEPATH": safe} if safe else {}
                    self.check(args, "forkserver", **env)

    def test_a_module_beside_the_script_that_the_zygote_imported_is_the_workers(self):
        # The zygote imported json itself; an exec'd worker finds the json.py
        # beside its script first, and so must the forked default's worker.
        script = self.write("app2/train.py", "import torch, json\n"
                            "print('json', getattr(json, 'MARK', 'stdlib'), flush=True)\n"
                            "print('forked', " + FORKED + ", flush=True)\n")
        self.write("app2/json.py", "MARK = 'beside the script'\n")
        for method in ([], ["--start-method=spawn"]):
            with self.subTest(start_method=method):
                p = subprocess.run([CXXRUN, "--standalone", "--nproc-per-node=1"] + method + [script],
                                   env=clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.python_path),
                                   capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("[default0]:json beside the script", p.stdout, p.stderr)
                if not method:
                    self.assertIn("forkserver: ready", p.stderr)
                    self.assertIn("[default0]:forked False", p.stdout)
        # A module the zygote took from the script's own directory (it is on
        # PYTHONPATH as well) is the same module: the worker is forked.
        os.unlink(os.path.join(self.dir, "app2", "json.py"))
        self.write("app2/mine.py", "")
        p = subprocess.run([CXXRUN, "--standalone", "--nproc-per-node=1", "--start-method=forkserver",
                            "--preload=mine", script],
                           env=clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.python_path + ":" + self.dir + "/app2"),
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("preloaded: mine", p.stderr)
        self.assertIn("[default0]:forked True", p.stdout, p.stderr)

    def test_the_zygote_imports_nothing_from_the_agents_cwd(self):
        # `python -c` (how the zygote starts) puts the cwd first on sys.path;
        # an exec'd worker of a script elsewhere never looks there.
        marker = os.path.join(self.dir, "planted")
        self.write("cwd/json.py", f"open({marker!r}, 'w').close()\n")
        p = subprocess.run([CXXRUN, "--standalone", "--nproc-per-node=1", self.script], cwd=os.path.join(self.dir, "cwd"),
                           env=clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.python_path),
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("[default0]:forked True", p.stdout, p.stderr)
        self.assertFalse(os.path.exists(marker), "the zygote imported json.py from the agent's cwd")
