"""The wheel (pyproject.toml, setup.py; docs/install.md) and `python -m cxxrun`.

Wheel: built from this source tree with Debian's python3-build, no isolation
and nothing downloaded, around the programs this build made
(CXXRUN_WHEEL_BINARIES, so nothing compiles twice); installed with pip
(--no-index --no-deps) into a fresh venv that sees the system's torch
(--system-site-packages); then used from it as a pip user would, with the
venv's bin/ first on PATH and a working directory outside the checkout: the
console scripts, `python -m cxxrun` for 2-worker jobs (torch's gloo
all_reduce among them), `import cxxrun`. Skips only when python3-build or
python3-venv is absent (scripts/install-deps.sh installs both).

SourcePackage: `python -m cxxrun` of a copy of the package that carries no
programs (the source tree; the .deb's, whose own test is test_package.py)
runs the `cxxrun` on PATH in its place, and never a console script of this
package, which would come back to it: one line and exit 2 instead."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from harness import CXXRUN, clean_env

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE_PACKAGE = os.path.join(ROOT, "agent", "python")
BINARIES = os.environ.get("CXXRUN_WHEEL_BINARIES", os.path.dirname(os.path.abspath(CXXRUN)))
with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
    VERSION = re.search(r"^project\(cxxrun VERSION ([0-9.]+)", f.read(), re.M).group(1)


def missing_tools():
    """Which of Debian's python3-build and python3-venv this Python lacks.
    Only these skip: without setuptools or wheel the build itself fails,
    and so does the test, with the build's words."""
    packages = {"build": "python3-build", "venv": "python3-venv", "ensurepip": "python3-venv"}
    missing = sorted({package for module, package in packages.items() if importlib.util.find_spec(module) is None})
    return f"{sys.executable} has no {' or '.join(missing)} (scripts/install-deps.sh installs them)" if missing else ""


def the_binary_says(*args):
    return subprocess.run([CXXRUN, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


TWO_WORKERS = """import os
print(f"worker {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
"""

ALL_REDUCE = """import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {t.item()}", flush=True)
dist.destroy_process_group()
"""

# What pip writes for a console script of the wheel (pyproject.toml's
# [project.scripts]).
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from cxxrun._launcher import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


class Jobs:
    """What a `cxxrun` reached through Python must do as the binary does."""

    def run_in(self, args, env, timeout=120):
        return subprocess.run(args, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def check_runs_the_binary(self, launcher, env):
        """`launcher` (argv before cxxrun's own arguments) is the binary: the
        same --version, the same refusal of a bad flag, and the same process
        (exec: the workers' parent is the process started)."""
        p = self.run_in(launcher + ["--version"], env)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, the_binary_says("--version").stdout, ""))
        p = self.run_in(launcher + ["--no-such-flag"], env)
        direct = the_binary_says("--no-such-flag")
        self.assertEqual(direct.returncode, 2)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (2, "", direct.stderr))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        job = ["--standalone", "--nproc-per-node=1", "--no-python", "sh", "-c",
               'echo "parent $PPID"; grep "^SigIgn" /proc/self/status']
        started = subprocess.Popen(launcher + job, cwd=self.work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        out, err = started.communicate(timeout=120)
        self.assertEqual(started.returncode, 0, err)
        self.assertIn(f"parent {started.pid}\n", out, "the launcher ran cxxrun as a child, not by exec")
        # A worker's ignored signals are the binary's: not Python's
        # SIGPIPE and SIGXFSZ, which an exec would otherwise hand down.
        ignored = re.search(r"SigIgn:\s*(\w+)", out).group(1)
        direct = subprocess.run([CXXRUN] + job, cwd=self.work, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(ignored, re.search(r"SigIgn:\s*(\w+)", direct.stdout).group(1))


@unittest.skipIf(missing_tools(), missing_tools())
class Wheel(unittest.TestCase, Jobs):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cxxrun_wheel_")
        cls.work = os.path.join(cls.tmp, "work")  # outside the checkout
        os.makedirs(cls.work)
        dist = os.path.join(cls.tmp, "dist")
        env = dict(os.environ, CXXRUN_WHEEL_BINARIES=BINARIES, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, ROOT],
                               cwd=cls.work, env=env, capture_output=True, text=True, timeout=240)
        if built.returncode != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise AssertionError("the wheel did not build:\n" + built.stdout[-3000:] + built.stderr[-3000:])
        (cls.wheel,) = [os.path.join(dist, f) for f in os.listdir(dist) if f.endswith(".whl")]
        cls.venv = os.path.join(cls.tmp, "venv")
        for args in ([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                     [os.path.join(cls.venv, "bin", "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                      cls.wheel]):
            p = subprocess.run(args, cwd=cls.work, env=env, capture_output=True, text=True, timeout=240)
            if p.returncode != 0:
                shutil.rmtree(cls.tmp, ignore_errors=True)
                raise AssertionError(f"{args}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        cls.bin = os.path.join(cls.venv, "bin")
        cls.python = os.path.join(cls.bin, "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self):
        """An activated venv: its bin/ first on PATH (its python3 the workers'),
        nothing of the checkout on PYTHONPATH."""
        env = clean_env(PATH=os.pathsep.join([self.bin, "/usr/bin", "/bin"]), VIRTUAL_ENV=self.venv)
        env.pop("PYTHONPATH", None)
        return env

    def test_a_platform_wheel_carrying_the_programs_and_the_package(self):
        name = os.path.basename(self.wheel)
        self.assertEqual(name, f"cxxrun-{VERSION}-py3-none-linux_{os.uname().machine}.whl")
        with zipfile.ZipFile(self.wheel) as z:
            infos = {i.filename: i for i in z.infolist()}
            self.assertIn("Root-Is-Purelib: false\n", z.read(f"cxxrun-{VERSION}.dist-info/WHEEL").decode())
            entry_points = z.read(f"cxxrun-{VERSION}.dist-info/entry_points.txt").decode()
        python = sorted(f for f in os.listdir(os.path.join(SOURCE_PACKAGE, "cxxrun"))
                        if f.endswith(".py") or f == "py.typed")
        self.assertEqual(sorted(n.split("/", 1)[1] for n in infos if n.startswith("cxxrun/") and "/bin/" not in n),
                         python)
        for program in ("cxxrun", "cxxrun-rdzv"):
            info = infos[f"cxxrun/bin/{program}"]
            self.assertTrue((info.external_attr >> 16) & 0o111, f"{program} is not executable in the wheel")
            self.assertIn(f"{program} = cxxrun._launcher:", entry_points)
            installed = os.path.join(self.venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                                     "site-packages", "cxxrun", "bin", program)
            if shutil.which("readelf"):
                sections = subprocess.run(["readelf", "-S", "-W", installed], capture_output=True, text=True).stdout
                self.assertIn(".text", sections)
                self.assertNotIn(".debug_info", sections, f"{program} is not stripped")

    def test_console_scripts(self):
        env = self.env()
        self.check_runs_the_binary([os.path.join(self.bin, "cxxrun")], env)
        p = self.run_in(["cxxrun-rdzv", "--help"], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Usage: cxxrun-rdzv", p.stdout)
        p = self.run_in(["cxxrun-rdzv", "--version"], env)
        self.assertEqual(p.stdout.split(" (")[0], f"cxxrun-rdzv {VERSION}")

    def test_python_dash_m_cxxrun(self):
        self.check_runs_the_binary([self.python, "-m", "cxxrun"], self.env())

    def test_a_two_worker_job(self):
        script = os.path.join(self.work, "two.py")
        with open(script, "w") as f:
            f.write(TWO_WORKERS)
        p = self.run_in(["python", "-m", "cxxrun", "--standalone", "--nproc-per-node=2", script], self.env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("worker 0 of 2", p.stdout)
        self.assertIn("worker 1 of 2", p.stdout)

    def test_a_two_worker_torch_job(self):
        env = self.env()
        if self.run_in(["python", "-c", "import torch.distributed"], env).returncode != 0:
            self.skipTest(f"no torch in {sys.executable}'s system site-packages (python3-torch)")
        script = os.path.join(self.work, "all_reduce.py")
        with open(script, "w") as f:
            f.write(ALL_REDUCE)
        p = self.run_in(["python", "-m", "cxxrun", "--standalone", "--nproc-per-node=2", script], env, timeout=240)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("rank 0 of 2: sum 3", p.stdout)
        self.assertIn("rank 1 of 2: sum 3", p.stdout)

    def test_workers_run_with_the_launching_python(self):
        """As under `python -m torch.distributed.run`: a venv's python that
        is not on PATH (the venv not activated) still runs the workers;
        PYTHON_EXEC, when set, still wins."""
        script = os.path.join(self.work, "which.py")
        with open(script, "w") as f:
            f.write("import sys; print('interpreter', sys.executable)\n")
        env = clean_env(PATH=os.pathsep.join(["/usr/bin", "/bin"]))
        env.pop("PYTHONPATH", None)
        for launcher in ([self.python, "-m", "cxxrun"], [os.path.join(self.bin, "cxxrun")]):
            p = self.run_in(launcher + ["--standalone", "--nproc-per-node=1", script], env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"interpreter {self.python}", p.stdout, launcher)
        p = self.run_in([self.python, "-m", "cxxrun", "--standalone", "--nproc-per-node=1", script],
                        dict(env, PYTHON_EXEC="/usr/bin/python3"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("interpreter /usr/bin/python3", p.stdout)

    def test_import_cxxrun(self):
        code = "import cxxrun, cxxrun.__main__, cxxrun._launcher; print(cxxrun.__file__)"
        p = self.run_in(["python", "-c", code], self.env())
        self.assertEqual(p.returncode, 0, p.stderr)
        # From the venv, not the checkout; importing __main__ runs nothing.
        self.assertEqual(p.stdout.strip().splitlines(), [os.path.join(
            self.venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages", "cxxrun",
            "__init__.py")])


class SourcePackage(unittest.TestCase, Jobs):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cxxrun_source_package_")
        cls.work = os.path.join(cls.tmp, "work")
        cls.scripts = os.path.join(cls.tmp, "scripts")  # a console script named cxxrun, nothing else
        os.makedirs(cls.work)
        os.makedirs(cls.scripts)
        cls.script = os.path.join(cls.scripts, "cxxrun")
        with open(cls.script, "w") as f:
            f.write(CONSOLE_SCRIPT.format(python=sys.executable))
        os.chmod(cls.script, 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self, *path):
        return clean_env(PYTHONPATH=SOURCE_PACKAGE, PATH=os.pathsep.join(path))

    def test_runs_the_cxxrun_on_path(self):
        self.check_runs_the_binary([sys.executable, "-m", "cxxrun"],
                                   self.env(os.path.dirname(os.path.abspath(CXXRUN)), "/usr/bin", "/bin"))

    def test_skips_its_own_console_script(self):
        env = self.env(self.scripts, os.path.dirname(os.path.abspath(CXXRUN)), "/usr/bin", "/bin")
        p = self.run_in([sys.executable, "-m", "cxxrun", "--version"], env)
        self.assertEqual((p.returncode, p.stdout), (0, the_binary_says("--version").stdout), p.stderr)

    def test_nothing_to_run_is_one_line_and_exit_2(self):
        # Only a console script on PATH: it would run this package again.
        for args in ([sys.executable, "-m", "cxxrun", "--version"], [self.script, "--version"]):
            p = self.run_in(args, self.env(self.scripts), timeout=60)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertRegex(p.stderr, r"^cxxrun: no cxxrun program to run: the cxxrun Python package at .*"
                                       r"install the cxxrun wheel or the cxxrun \.deb\n$")
        p = self.run_in([sys.executable, "-m", "cxxrun"], self.env(self.work), timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_importing_runs_nothing(self):
        p = self.run_in([sys.executable, "-c", "import cxxrun.__main__, cxxrun._launcher"], self.env(self.scripts))
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))


if __name__ == "__main__":
    unittest.main()
