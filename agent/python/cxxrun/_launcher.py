"""Finds the cxxrun programs and runs them in this process's place.

Behind the wheel's console scripts (`cxxrun`, `cxxrun-rdzv`) and
`python -m cxxrun`. The program runs by exec, not as a child: its pid, argv,
exit status and signals are exactly the binary's, as if the user had typed
its path.

Which program: the one this package carries (cxxrun/bin/, in a wheel), else
the first one on PATH (the .deb's /usr/bin, a source build) that is not a
console script of this package. A console script comes back here; skipping
it is what keeps `python -m cxxrun` of a copy without a binary (the source
tree, the copy cxxrun gives its workers) from exec'ing itself in a loop.

Nothing runs at import: every copy of this package, the one embedded in
each worker included, carries this file.
"""
import os
import signal
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")
# What every console script pip or setuptools writes for an entry point of
# this module holds; a native program never does.
_SCRIPT_MARK = b"cxxrun._launcher"
_HEAD_BYTES = 4096


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _console_script(path):
    """Whether `path` is a script that runs this module (it starts with
    "#!" and names it), rather than a program."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    return head.startswith(b"#!") and _SCRIPT_MARK in head


def bundled(name):
    """The program `name` this package carries, or None."""
    path = os.path.join(_BIN, name)
    return path if _executable(path) else None


def find(name):
    """The program `name` to run: the bundled one, else the first on PATH
    that is not one of this package's console scripts. None if neither."""
    path = bundled(name)
    if path:
        return path
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or os.curdir, name)
        if _executable(candidate) and not _console_script(candidate):
            return os.path.abspath(candidate)
    return None


def run(name, args=None):
    """Replaces this process with the program `name`, given `args` (default:
    this process's own, less argv[0]). Does not return: when there is no
    program to run, says so in one line on stderr and exits 2."""
    if args is None:
        args = sys.argv[1:]
    path = find(name)
    if path is None:
        sys.stderr.write(f"{name}: no {name} program to run: the cxxrun Python package at "
                         f"{os.path.dirname(_BIN)} carries none and PATH has none (this package's own "
                         f"scripts aside); install the cxxrun wheel or the cxxrun .deb\n")
        sys.stderr.flush()
        raise SystemExit(2)
    if name == "cxxrun" and sys.executable and "PYTHON_EXEC" not in os.environ:
        # Python workers run with the interpreter that launched this, as
        # under `python -m torch.distributed.run` (torch's sys.executable):
        # a venv's python, activated or not. PYTHON_EXEC is how the program
        # is told (launcher/program.h); one the user set wins.
        os.environ["PYTHON_EXEC"] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    # Python starts with SIGPIPE and SIGXFSZ ignored, and an ignored signal
    # stays ignored across exec: give the program the defaults the shell
    # would have (what subprocess's restore_signals does).
    for sig in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_DFL)
    try:
        # argv[0] as a shell gives it to a program found on PATH.
        os.execv(path, [name] + list(args))
    except OSError as e:
        sys.stderr.write(f"{name}: cannot execute {path}: {e.strerror}\n")
        sys.stderr.flush()
        raise SystemExit(2)


def main():
    """The `cxxrun` console script."""
    run("cxxrun")


def rdzv_main():
    """The `cxxrun-rdzv` console script."""
    run("cxxrun-rdzv")
