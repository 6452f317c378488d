"""Warm restarts without a flag (agent/warm/forkserver.h): with no --start-method,
a script that imports torch at its top level forks every worker from a
forkserver that imported it once, the first attempt's too. Any other Python
program's first attempt starts by exec, as spawn; the agent sees what its
workers import (native code they mapped) and starts a forkserver with it, so
the first restart forks warm workers. A program that imports nothing native
never gets one, an explicit --start-method is obeyed, and an unsafe zygote
means exec with one line.

A fake package with native code (a copy of libz, loaded by ctypes) stands in
for torch, to stay fast; one test uses torch itself where it is installed."""
import os
import shutil

from harness import FORKED, TORCH_PYTHON, TempDirTest, clean_env, run, torch_importable

LEARNED = "forkserver: the workers import fakenative"

# How the worker was started, and a failure in attempt 0 once the agent has
# had time to look (Forkserver::kFirstLook is 0.5 s).
WORKER = r'''
import os, sys, time
{imports}
forked = ''' + FORKED + r'''
n = os.environ["TORCHELASTIC_RESTART_COUNT"]
print("attempt", n, "forked", forked, flush=True)
if int(n) < (2 if sys.argv[1:] == ["fail twice"] else 1):
    time.sleep(1.5)
    if os.environ["LOCAL_RANK"] == "0":
        sys.exit(4)
    time.sleep(60)
'''


def find_libz():
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        path = os.path.join(d, "libz.so.1")
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


class WarmDefault(TempDirTest):
    def setUp(self):
        super().setUp()
        libz = find_libz()
        if libz is None:
            self.skipTest("no libz.so.1 to stand in for a package's native code")
        self.site = os.path.join(self.dir, "site-packages")
        package = os.path.join(self.site, "fakenative")
        os.makedirs(package)
        shutil.copy(libz, os.path.join(package, "libfake.so"))
        self.package_body = ("import ctypes, os\n"
                             "_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libfake.so'))\n"
                             f"with open({self.dir + '/imports'!r}, 'a') as f:\n"
                             "    f.write(f'{os.getpid()}\\n')\n")
        self.write(os.path.join(package, "__init__.py"), self.package_body)

    def fake_torch(self, extra=""):
        """A `torch` first on the path, with the fake native code."""
        package = os.path.join(self.site, "torch")
        os.makedirs(package, exist_ok=True)
        shutil.copy(os.path.join(self.site, "fakenative", "libfake.so"), package)
        self.write(os.path.join(package, "__init__.py"), self.package_body + extra)
        self.write(os.path.join(package, "nn.py"), "")

    def imported(self):
        with open(os.path.join(self.dir, "imports")) as f:
            return len(f.read().split())

    def write(self, path, body):
        with open(path, "w") as f:
            f.write(body)
        return path

    def worker(self, imports="import fakenative"):
        return self.write(os.path.join(self.dir, "w.py"), WORKER.format(imports=imports))

    def job(self, args, env=None, timeout=60):
        env = env or clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.site)
        return run(["--standalone", "--nproc-per-node=2", "--max-restarts=1"] + list(args), env=env, timeout=timeout)

    def attempts(self, out):
        return sorted(line.split(":", 1)[1] for line in out.splitlines() if ":attempt " in line)

    def test_the_first_attempt_starts_by_exec_and_the_restart_forks_warm(self):
        rc, out, err = self.job([self.worker()])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count(LEARNED), 1, err)
        self.assertIn("preloading fakenative", err)
        self.assertNotIn("by exec", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked True"] * 2)
        # Imported by attempt 0's two workers and once by the zygote; the
        # forked workers found it loaded.
        with open(os.path.join(self.dir, "imports")) as f:
            self.assertEqual(len(f.read().split()), 3)

    def test_a_program_that_imports_nothing_native_never_gets_a_forkserver(self):
        rc, out, err = self.job([self.worker(imports="import json")])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("forkserver", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked False"] * 2)

    def test_an_explicit_spawn_is_obeyed(self):
        for how in (["--start-method=spawn"], ["--start_method", "spawn"]):
            rc, out, err = self.job(how + [self.worker()])
            self.assertEqual(rc, 0, err)
            self.assertNotIn("forkserver", err)
            self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked False"] * 2)
        env = clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.site, PET_START_METHOD="spawn")
        rc, out, err = self.job([self.worker()], env=env)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("forkserver", err)

    def test_a_package_that_starts_a_thread_makes_restarts_exec_with_one_line(self):
        self.write(os.path.join(self.site, "fakenative", "__init__.py"),
                   self.package_body + "import threading, time\n"
                                       "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
        rc, out, err = self.job(["--max-restarts=2", self.worker(), "fail twice"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count(LEARNED), 1, err)
        self.assertEqual(err.count("the forkserver failed: the forkserver has 2 threads; attempt 1 starts by exec"),
                         1, err)
        self.assertEqual(err.count("the forkserver has 2 threads"), 1, err)  # not again at attempt 2
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked False"] * 2 +
                         ["attempt 2 forked False"] * 2)

    def test_a_script_that_imports_torch_at_its_top_level_forks_its_first_attempt(self):
        self.fake_torch()
        rc, out, err = self.job([self.worker(imports="import torch.nn as nn  # the model")])
        self.assertEqual(rc, 0, err)
        self.assertIn("w.py imports torch.nn at its top level (line 3); its workers fork from a forkserver with "
                      "torch, torch.distributed preloaded", err)
        self.assertNotIn("the workers import", err)  # nothing left to learn
        self.assertNotIn("by exec", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked True"] * 2 + ["attempt 1 forked True"] * 2)
        self.assertEqual(self.imported(), 1)  # once for the node: by the zygote

    def test_one_worker_a_node_forks_from_the_first_attempt_too(self):
        self.fake_torch()
        env = clean_env(PYTHON_EXEC=TORCH_PYTHON, PYTHONPATH=self.site)
        rc, out, err = run(["--standalone", "--nproc-per-node=1", "--max-restarts=1", self.worker("import torch")],
                           env=env, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("w.py imports torch at its top level (line 3)", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked True", "attempt 1 forked True"])

    def test_an_import_of_torch_that_may_not_run_is_learned_instead(self):
        self.fake_torch()
        worker = self.worker(imports="try:\n    import torch\nexcept ImportError:\n    pass")
        rc, out, err = self.job([worker])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("at its top level", err)
        self.assertEqual(err.count("forkserver: the workers import torch"), 1, err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked True"] * 2)

    def test_a_torch_that_starts_a_thread_makes_every_attempt_exec_with_one_line(self):
        self.fake_torch("import threading, time\n"
                        "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
        rc, out, err = self.job([self.worker(imports="import torch")])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count("the forkserver failed: the forkserver has 2 threads; attempt 0 starts by exec"),
                         1, err)
        self.assertEqual(err.count("the forkserver has 2 threads"), 1, err)  # not again at attempt 1
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked False"] * 2)

    def test_a_torch_program_restarts_warm(self):
        if not torch_importable("torch.distributed"):
            self.skipTest(f"{TORCH_PYTHON} cannot import torch.distributed")
        rc, out, err = self.job([self.worker(imports="import torch.distributed")], timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("imports torch.distributed at its top level", err)
        self.assertIn("preloading torch,torch.distributed", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked True"] * 2 + ["attempt 1 forked True"] * 2)
        # Imported inside a function: learned from the first attempt.
        rc, out, err = self.job([self.worker(imports="def main():\n    import torch.distributed\nmain()")],
                                timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("forkserver: the workers import", err)
        self.assertEqual(self.attempts(out), ["attempt 0 forked False"] * 2 + ["attempt 1 forked True"] * 2)
