"""The Debian packages, installed as a user would and used with no source
tree: cxxrun runs a 2-worker job (spawn and forkserver), cxxrun-rdzv serves a
job's rendezvous and stops on SIGTERM, its service files name what it
accepts, and a separate CMake project builds against cxxrun::worker and runs
under the installed cxxrun.

The packages are the ones scripts/package.sh leaves in build/ (CXXRUN_PACKAGES
names another directory); scripts/test.sh builds them before the tests, and
without them the tests skip, saying so. They are unpacked with dpkg-deb -x
into a temporary root: the files land exactly where dpkg would put them
(usr/bin, etc/default, lib/systemd/system), without root, without touching
the machine's package database, and gone with the test. The programs find
nothing through the source tree or the build tree: each runs from that root
with a working directory outside the checkout."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

from harness import clean_env, free_port, wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGES = os.environ.get("CXXRUN_PACKAGES", os.path.join(ROOT, "build"))
PYTHON_PACKAGE = os.path.join(ROOT, "agent", "python", "cxxrun")
# Debian's place for packaged Python modules, read by every Python 3 on it.
DIST_PACKAGES = "usr/lib/python3/dist-packages"
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip() \
    if shutil.which("dpkg") else ""


def package(name):
    path = os.path.join(PACKAGES, f"{name}_0.1.0_{ARCH}.deb")
    return path if os.path.exists(path) else None


CONSUMER_CMAKE = """cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
find_package(cxxrun 0.1 REQUIRED)
add_executable(consumer main.cc)
target_link_libraries(consumer PRIVATE cxxrun::worker)
"""

CONSUMER_MAIN = """#include <cstdint>
#include <cstdio>
#include "worker_runtime/communicator.h"
int main() {
  auto comm = cxxrun::worker::init();
  int64_t value = comm->rank() + 1;
  comm->allreduce(&value, 1, cxxrun::worker::DType::int64, cxxrun::worker::ReduceOp::sum);
  std::printf("rank %d of %d: sum %lld\\n", comm->rank(), comm->size(), static_cast<long long>(value));
  return value == comm->size() * (comm->size() + 1) / 2 ? 0 : 1;
}
"""


@unittest.skipIf(not ARCH or package("cxxrun") is None or package("cxxrun-dev") is None,
                 f"no cxxrun packages in {PACKAGES} (scripts/package.sh builds them; scripts/test.sh runs it)")
class InstalledPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cxxrun_pkg_")
        cls.root = os.path.join(cls.tmp, "root")
        for name in ("cxxrun", "cxxrun-dev"):
            subprocess.run(["dpkg-deb", "-x", package(name), cls.root], check=True, timeout=120)
        cls.cxxrun = os.path.join(cls.root, "usr", "bin", "cxxrun")
        cls.rdzv = os.path.join(cls.root, "usr", "bin", "cxxrun-rdzv")
        cls.work = os.path.join(cls.tmp, "work")  # outside the checkout
        os.makedirs(cls.work)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_installed(self, args, timeout=60, env=None):
        return subprocess.run(args, cwd=self.work, env=env or clean_env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def test_packages_are_current_and_complete(self):
        built = subprocess.run([os.environ.get("CXXRUN", os.path.join(ROOT, "build", "bin", "cxxrun")),
                                "--version"], capture_output=True, text=True).stdout.strip()
        installed = self.run_installed([self.cxxrun, "--version"]).stdout.strip()
        self.assertRegex(installed, r"^cxxrun 0\.1\.0 \(commit ([0-9a-f]+(-dirty)?|unknown)\)$")
        self.assertEqual(installed, built, "the packages in build/ are from another commit: run scripts/package.sh")
        self.assertTrue(self.run_installed([self.rdzv, "--version"]).stdout.startswith("cxxrun-rdzv 0.1.0 (commit "))
        for path in ("usr/bin/cxxrun", "usr/bin/cxxrun-rdzv", "usr/bin/cxxrunctl", "etc/default/cxxrun-rdzv",
                     "lib/systemd/system/cxxrun-rdzv.service", "usr/include/cxxrun/worker_runtime/communicator.h",
                     "usr/share/man/man1/cxxrun.1", "usr/share/man/man1/cxxrun-rdzv.1", "usr/share/man/man1/cxxrunctl.1",
                     "usr/share/bash-completion/completions/cxxrun", "usr/share/zsh/vendor-completions/_cxxrun-rdzv"):
            self.assertTrue(os.path.exists(os.path.join(self.root, path)), path)

    def test_depends_name_the_shared_libraries(self):
        depends = subprocess.run(["dpkg-deb", "-f", package("cxxrun"), "Depends"], capture_output=True,
                                 text=True, check=True).stdout
        for lib in ("libc6", "libstdc++6", "libssl3", "libspdlog"):
            self.assertIn(lib, depends)
        dev = subprocess.run(["dpkg-deb", "-f", package("cxxrun-dev"), "Depends"], capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("cxxrun (= 0.1.0)", dev)
        self.assertIn("libgloo-dev", dev)
        conffiles = subprocess.run(["dpkg-deb", "-I", package("cxxrun"), "conffiles"], capture_output=True,
                                   text=True, check=True).stdout
        self.assertEqual(conffiles.split(), ["/etc/default/cxxrun-rdzv"])

    def test_nothing_refers_to_the_build(self):
        for top, _, files in os.walk(self.root):
            for name in files:
                path = os.path.join(top, name)
                if name.endswith((".cmake", ".service", ".h")) or "default" in top:
                    with open(path, errors="replace") as f:
                        text = f.read()
                    self.assertNotIn(ROOT, text, path)

    def test_the_python_package(self):
        listing = subprocess.run(["dpkg-deb", "-c", package("cxxrun")], capture_output=True, text=True,
                                 check=True).stdout
        wanted = sorted(f for f in os.listdir(PYTHON_PACKAGE) if f.endswith(".py") or f == "py.typed")
        self.assertIn("__main__.py", wanted)
        packaged = sorted(re.findall(r"\./" + re.escape(DIST_PACKAGES) + r"/cxxrun/([^/\s]+)$", listing, re.M))
        self.assertEqual(packaged, wanted, "the .deb's cxxrun package is not agent/python/cxxrun/'s files")
        for name in wanted:
            with open(os.path.join(PYTHON_PACKAGE, name), "rb") as a, \
                    open(os.path.join(self.root, DIST_PACKAGES, "cxxrun", name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        # Imported from the unpacked tree, as the system Python would from
        # /usr/lib/python3/dist-packages, with the working directory outside
        # the checkout; `python3 -m cxxrun` runs the package's usr/bin/cxxrun.
        site = os.path.join(self.root, DIST_PACKAGES)
        env = clean_env(PYTHONPATH=site, PATH=os.pathsep.join([os.path.join(self.root, "usr", "bin"), "/usr/bin", "/bin"]))
        p = self.run_installed([sys.executable, "-c", "import cxxrun; print(cxxrun.__file__)"], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), os.path.join(site, "cxxrun", "__init__.py"))
        installed = self.run_installed([self.cxxrun, "--version"]).stdout
        p = self.run_installed([sys.executable, "-m", "cxxrun", "--version"], env=env)
        self.assertEqual((p.returncode, p.stdout), (0, installed), p.stderr)
        p = self.run_installed([sys.executable, "-m", "cxxrun", "--standalone", "--nproc-per-node=2", "--no-python",
                                "sh", "-c", 'echo "rank $RANK of $WORLD_SIZE"'], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("rank 1 of 2", p.stdout)
        # With no cxxrun program to run, one line and exit 2.
        p = self.run_installed([sys.executable, "-m", "cxxrun", "--version"],
                               env=clean_env(PYTHONPATH=site, PATH=self.work))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("no cxxrun program to run", p.stderr)

    def test_a_two_worker_job(self):
        p = self.run_installed([self.cxxrun, "--standalone", "--nproc-per-node=2", "--no-python",
                                "sh", "-c", 'echo "rank $RANK of $WORLD_SIZE"'])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("rank 0 of 2", p.stdout)
        self.assertIn("rank 1 of 2", p.stdout)

    @unittest.skipIf(shutil.which("python3") is None, "no python3")
    def test_a_forkserver_job(self):
        script = os.path.join(self.work, "hello.py")
        with open(script, "w") as f:
            f.write("import os\nprint('forked', os.environ['RANK'], flush=True)\n")
        p = self.run_installed([self.cxxrun, "--standalone", "--nproc-per-node=2", "--start-method=forkserver",
                                "--preload=json", script])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("forked 0", p.stdout)
        self.assertIn("forked 1", p.stdout)
        self.assertNotIn("starts by exec", p.stderr)

    def test_rdzv_serves_a_job_and_stops_on_sigterm(self):
        port = free_port()
        env = clean_env(CXXRUN_RDZV_PORT=port, JOURNAL_STREAM="8:12345")
        server = subprocess.Popen([self.rdzv], cwd=self.work, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            lines = []
            wait_for(lambda: lines.append(server.stderr.readline()) or "listening on" in lines[-1], timeout=10,
                     what="cxxrun-rdzv to listen")
            # Under journald: the priority prefix and no timestamp of its own.
            self.assertEqual(lines[-1].strip(), f"<6>listening on 127.0.0.1:{port}")
            p = self.run_installed([self.cxxrun, "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                                    "--rdzv-conf=is_host=false", "--rdzv-id=pkg", "--nnodes=1",
                                    "--nproc-per-node=2", "--no-python", "sh", "-c", 'echo "rank $RANK"'])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("rank 1", p.stdout)
            server.send_signal(signal.SIGTERM)
            rest = server.communicate(timeout=10)[1]
            self.assertEqual(server.returncode, 0, rest)
            self.assertIn("<6>received SIGTERM, stopping", rest)
            self.assertIn("<6>stopped", rest)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()

    def test_the_service_files_name_what_cxxrun_rdzv_takes(self):
        with open(os.path.join(self.root, "lib/systemd/system/cxxrun-rdzv.service")) as f:
            unit = f.read()
        self.assertIn("ExecStart=/usr/bin/cxxrun-rdzv\n", unit)
        self.assertIn("EnvironmentFile=-/etc/default/cxxrun-rdzv\n", unit)
        with open(os.path.join(self.root, "etc/default/cxxrun-rdzv")) as f:
            names = set(re.findall(r"^#?(CXXRUN_RDZV_[A-Z_]+)=", f.read(), re.M))
        self.assertEqual(names, {"CXXRUN_RDZV_PORT", "CXXRUN_RDZV_HOST", "CXXRUN_RDZV_TOKEN_FILE",
                                 "CXXRUN_RDZV_MAX_VALUE_BYTES", "CXXRUN_RDZV_MEMORY_LIMIT"})
        # Each one is read: a bad value of each is refused, naming its option.
        token = os.path.join(self.work, "no-such-token")
        for name, bad, option in (("CXXRUN_RDZV_PORT", "x", "--port"), ("CXXRUN_RDZV_MEMORY_LIMIT", "0", "--memory-limit"),
                                  ("CXXRUN_RDZV_MAX_VALUE_BYTES", "0", "--max-value-bytes"),
                                  ("CXXRUN_RDZV_TOKEN_FILE", token, "--token-file")):
            p = self.run_installed([self.rdzv], env=clean_env(**{"CXXRUN_RDZV_PORT": "0", name: bad}), timeout=10)
            self.assertEqual(p.returncode, 2, (name, p.stderr))
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(option, p.stderr)
        # A flag wins over the environment.
        p = self.run_installed([self.rdzv, "--port", "x"], env=clean_env(CXXRUN_RDZV_PORT="0"), timeout=10)
        self.assertEqual(p.returncode, 2)
        if shutil.which("systemd-analyze"):
            v = subprocess.run(["systemd-analyze", "verify", "--root", self.root, "cxxrun-rdzv.service"],
                               capture_output=True, text=True, timeout=60)
            self.assertNotIn("Unknown", v.stderr)

    @unittest.skipIf(shutil.which("cmake") is None or shutil.which("c++") is None, "no cmake or c++")
    def test_a_consumer_builds_against_cxxrun_worker(self):
        src = os.path.join(self.tmp, "consumer")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(CONSUMER_CMAKE)
        with open(os.path.join(src, "main.cc"), "w") as f:
            f.write(CONSUMER_MAIN)
        build = os.path.join(self.tmp, "consumer-build")
        for args in (["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={self.root}/usr"],
                     ["cmake", "--build", build, "-j2"]):
            p = subprocess.run(args, capture_output=True, text=True, timeout=240)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_installed([self.cxxrun, "--standalone", "--nproc-per-node=2", "--no-python",
                                os.path.join(build, "consumer")])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("rank 0 of 2: sum 3", p.stdout)
        self.assertIn("rank 1 of 2: sum 3", p.stdout)


if __name__ == "__main__":
    unittest.main()
