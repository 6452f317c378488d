"""The wheel's build step that pyproject.toml cannot say: the `cxxrun` and
`cxxrun-rdzv` programs, built by CMake from this tree (or taken ready-built
from CXXRUN_WHEEL_BINARIES=<dir>), stripped, into the package's bin/; the
version from CMakeLists.txt's project(VERSION); a platform tag that fits
programs rather than a Python extension (py3-none-<platform>: any Python 3
runs them, one machine architecture does). docs/install.md says why the tag
is linux_<arch> and not manylinux.

Everything setuptools writes goes under build-wheel/ (its build and temp
dirs, the CMake tree, the egg-info), never into build/ (CMake's dev tree) or
beside the sources.
"""
import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ("cxxrun", "cxxrun-rdzv")
BUILD_BASE = "build-wheel"


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(\s*cxxrun\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", f.read(), re.M)
    if not m:
        raise SystemExit("setup.py: CMakeLists.txt has no 'project(cxxrun VERSION x.y.z ...)' to take the version from")
    return m.group(1)


VERSION = project_version()


class build_py_with_programs(build_py):
    """The package's Python, then its programs in cxxrun/bin/."""

    def run(self):
        # A file since removed from agent/python/cxxrun/ (or a program from
        # an earlier build) must not linger in build-wheel/ and ship.
        shutil.rmtree(os.path.join(self.build_lib, "cxxrun"), ignore_errors=True)
        super().run()
        ready = os.environ.get("CXXRUN_WHEEL_BINARIES")
        source = os.path.abspath(ready) if ready else self.cmake_build()
        strip = shutil.which("strip")
        if strip is None:
            raise SystemExit("setup.py: no 'strip' on PATH (binutils): the wheel's programs are shipped stripped")
        bin_dir = os.path.join(self.build_lib, "cxxrun", "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for name in PROGRAMS:
            program = os.path.join(source, name)
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                where = f"CXXRUN_WHEEL_BINARIES={ready}" if ready else "the CMake build"
                raise SystemExit(f"setup.py: {where} has no program {program}")
            target = os.path.join(bin_dir, name)
            shutil.copyfile(program, target)
            os.chmod(target, 0o755)
            subprocess.run([strip, target], check=True)
            # Programs of another version (stale CXXRUN_WHEEL_BINARIES) must
            # not ship under this one's name.
            said = subprocess.run([target, "--version"], capture_output=True, text=True, timeout=60).stdout
            if not said.startswith(f"{name} {VERSION} "):
                raise SystemExit(f"setup.py: {program} --version says {said.strip()!r}, not version {VERSION}")

    def cmake_build(self):
        """Configures a Release tree under setuptools' temp dir and builds
        the two programs only; returns the folder they land in. CMake reads
        CMAKE_BUILD_PARALLEL_LEVEL and CMAKE_CXX_COMPILER_LAUNCHER (ccache)
        from the environment."""
        tree = os.path.join(os.path.abspath(self.get_finalized_command("build").build_temp), "cmake")
        configure = ["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF"]
        if shutil.which("ninja") and not os.path.exists(os.path.join(tree, "CMakeCache.txt")):
            configure += ["-G", "Ninja"]
        self.announce(f"configuring cxxrun in {tree}", level=2)
        subprocess.run(configure, check=True)
        build = ["cmake", "--build", tree, "--target", *PROGRAMS]
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            build += ["--parallel", str(os.cpu_count() or 1)]
        subprocess.run(build, check=True)
        return os.path.join(tree, "bin")


class ProgramsDistribution(Distribution):
    """Native programs inside: the wheel's root is platlib (not pure), as
    for a package with a compiled extension."""

    def has_ext_modules(self):
        return True


class platform_wheel(bdist_wheel):
    """A wheel for one platform but any Python 3: the programs are native,
    the Python is plain."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


os.makedirs(os.path.join(ROOT, BUILD_BASE), exist_ok=True)
setup(
    version=VERSION,
    distclass=ProgramsDistribution,
    cmdclass={"build_py": build_py_with_programs, "bdist_wheel": platform_wheel},
    options={
        "build": {"build_base": BUILD_BASE},
        "egg_info": {"egg_base": BUILD_BASE},
    },
)
