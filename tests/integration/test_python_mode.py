"""Python entrypoints: script, -m module, PYTHON_EXEC, --run-path, --no-python."""
import os

from harness import TempDirTest, clean_env, run

PY = 'import os, sys\nprint("py", os.environ["RANK"], sys.argv[1:], flush=True)\n'


class PythonMode(TempDirTest):
    def setUp(self):
        super().setUp()
        with open(f"{self.dir}/job.py", "w") as f:
            f.write(PY)
        os.makedirs(f"{self.dir}/pkg")
        with open(f"{self.dir}/pkg/mod.py", "w") as f:
            f.write(PY)

    def test_script_runs_under_python(self):
        rc, out, err = run(["--nproc-per-node=2", f"{self.dir}/job.py", "--lr", "0.1"],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[default0]:py 0 ['--lr', '0.1']", "[default1]:py 1 ['--lr', '0.1']"])

    def test_module(self):
        rc, out, err = run(["--nproc-per-node=1", "-m", "mod", "x"],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3", PYTHONPATH=f"{self.dir}/pkg"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "[default0]:py 0 ['x']\n")

    def test_run_path(self):
        rc, out, err = run(["--nproc-per-node=1", "--run-path", f"{self.dir}/job.py", "y"],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "[default0]:py 0 ['y']\n")

    def test_a_segfault_shows_the_python_stack_in_the_summary(self):
        # faulthandler is on for Python workers unless the user says
        # otherwise: the summary's tail names the function that crashed.
        with open(f"{self.dir}/crash.py", "w") as f:
            f.write("import ctypes\n\ndef read_null():\n    ctypes.string_at(0)\n\nread_null()\n")
        rc, out, err = run(["--nproc-per-node=1", f"{self.dir}/crash.py"],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3"))
        self.assertEqual(rc, 139, err)
        summary = err[err.find("Root Cause"):]
        self.assertIn("Fatal Python error: Segmentation fault", summary)
        self.assertIn("in read_null", summary)
        # The user's choice stays: empty PYTHONFAULTHANDLER is off.
        rc, out, err = run(["--nproc-per-node=1", f"{self.dir}/crash.py"],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3", PYTHONFAULTHANDLER=""))
        self.assertEqual(rc, 139, err)
        self.assertNotIn("Fatal Python error", err)

    def test_python_exec_is_used(self):
        fake = self.script("fakepy", f'echo "fake $*" > {self.dir}/fake.out\n')
        rc, out, err = run(["--nproc-per-node=1", f"{self.dir}/job.py"], env=clean_env(PYTHON_EXEC=fake))
        self.assertEqual(rc, 0, err)
        with open(f"{self.dir}/fake.out") as f:
            self.assertEqual(f.read().strip(), f"fake -u {self.dir}/job.py")

    def test_no_python_from_path(self):
        rc, out, err = run(["--nproc-per-node=2", "--no-python", "echo", "hi"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:hi", "[default1]:hi"])
