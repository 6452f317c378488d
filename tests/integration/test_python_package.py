"""`import cxxrun` in a Python worker under cxxrun (agent/python/hook.h,
`hook_python` in agent/agent.cc): the agent's embedded copy of the package,
first on every worker's PYTHONPATH whatever --log-dir is, every file of it,
ahead of any other copy; the page it writes is the agent's."""
import os

from harness import TempDirTest, clean_env, run

REPORT = """
import os, sys
import cxxrun
import cxxrun._layout
here = os.path.dirname(cxxrun.__file__)
print("package:", here)
print("py.typed:", os.path.exists(os.path.join(here, "py.typed")))
print("enabled:", cxxrun.enabled())
cxxrun.heartbeat()
cxxrun.step(5)
with cxxrun.section("step", timeout=30):
    pass
"""


class ImportCxxrun(TempDirTest):
    def worker(self, body=REPORT):
        path = os.path.join(self.dir, "w.py")
        with open(path, "w") as f:
            f.write(body)
        return path

    def report(self, out):
        """What the worker printed, less its "[default0]:" prefix."""
        lines = [line.split("]:", 1)[-1] for line in out.splitlines()]
        return dict(line.split(": ", 1) for line in lines if line.startswith(("package", "py.typed", "enabled")))

    def test_without_a_log_dir_the_package_is_still_there(self):
        # --log-dir=/dev/null: no run directory, so the hook goes into a
        # private temporary directory, removed when the agent exits.
        rc, out, err = run(["--nproc-per-node=1", "--log-dir=/dev/null", self.worker()], timeout=60)
        self.assertEqual(rc, 0, err)
        report = self.report(out)
        # Every worker has a page (the step it reports is its progress,
        # docs/restarts.md), but without a hang flag nothing watches its
        # beats: enabled() is False.
        self.assertEqual(report["enabled"], "False")
        self.assertEqual(report["py.typed"], "True")
        self.assertRegex(report["package"], r"/cxxrun-hook-\d+-\d+-\d+-\w{6}/python/cxxrun$")
        self.assertFalse(os.path.exists(report["package"]), "the private hook directory outlived the agent")

    def test_without_a_log_dir_a_watched_worker_writes_its_page(self):
        rc, out, err = run(["--nproc-per-node=2", "--log-dir=/dev/null", "--heartbeat-timeout=30",
                            self.worker()], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.count("enabled: True"), 2, out + err)

    def test_with_the_temporary_run_directory_the_package_is_in_memory(self):
        # No --log-dir: the run directory is a temporary one removed at exit,
        # whose hook nobody reads after; its directories on a disk mounted
        # with discard each cost the device a wait on the way out, so the
        # hook goes to /dev/shm instead, and goes with the agent too.
        if not os.access("/dev/shm", os.W_OK | os.X_OK):
            self.skipTest("no writable /dev/shm")
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        rc, out, err = run(["--nproc-per-node=1", self.worker()], env=clean_env(TMPDIR=tmp), timeout=60)
        self.assertEqual(rc, 0, err)
        report = self.report(out)
        self.assertRegex(report["package"], r"^/dev/shm/cxxrun-hook-\d+-\d+-\d+-\w{6}/python/cxxrun$")
        self.assertFalse(os.path.exists(report["package"]), "the hook's directory outlived the agent")
        self.assertEqual(os.listdir(tmp), [], "the temporary run directory outlived the agent")

    def test_with_a_log_dir_the_package_is_the_run_directory_s(self):
        logs = os.path.join(self.dir, "logs")
        rc, out, err = run(["--nproc-per-node=1", f"--log-dir={logs}", "--section-timeout=step=30",
                            self.worker()], timeout=60)
        self.assertEqual(rc, 0, err)
        report = self.report(out)
        self.assertEqual(report["enabled"], "True")
        self.assertTrue(report["package"].startswith(logs + "/"), report["package"])
        self.assertTrue(report["package"].endswith("/python/cxxrun"), report["package"])

    def test_the_agent_s_copy_comes_before_an_installed_one(self):
        # Another cxxrun on the worker's PYTHONPATH (as pip's or the .deb's
        # would be found): the agent's copy, which matches its page, wins.
        other = os.path.join(self.dir, "site", "cxxrun")
        os.makedirs(other)
        with open(os.path.join(other, "__init__.py"), "w") as f:
            f.write("raise ImportError('the installed copy was imported')\n")
        rc, out, err = run(["--nproc-per-node=1", "--log-dir=/dev/null", self.worker()],
                           env=clean_env(PYTHONPATH=os.path.dirname(other)), timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("/cxxrun-hook-", self.report(out)["package"])
