"""`import cxxrun` under torchrun (`python -m torch.distributed.run`), found
on PYTHONPATH as an installed copy would be: it imports, enabled() is False
and every call does nothing, in every worker, and the job ends 0."""
import os
import subprocess
import sys

import pytest

from conftest import LAYOUT, PACKAGE_DIR

WORKER = r"""
import os
import sys
import threading

import cxxrun

assert cxxrun.__file__.startswith(sys.argv[1]), cxxrun.__file__
assert cxxrun.enabled() is False
cxxrun.heartbeat()
cxxrun.step(int(os.environ["RANK"]))
with cxxrun.section("step", timeout=5):
    with cxxrun.section("inner"):
        pass
side = threading.Thread(target=lambda: (cxxrun.heartbeat(), cxxrun.section("side").__enter__()))
side.start()
side.join()
assert cxxrun.enabled() is False
print("rank %s of %s: cxxrun off" % (os.environ["RANK"], os.environ["WORLD_SIZE"]))
"""


def _torch_run_available():
    try:
        return subprocess.run([sys.executable, "-c", "import torch.distributed.run"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _torch_run_available(), reason=f"{sys.executable} has no torch.distributed.run")
def test_import_cxxrun_under_torchrun_is_a_quiet_no_op(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CXXRUN_", "PET_", "TORCHELASTIC_"))}
    env["PYTHONPATH"] = PACKAGE_DIR
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TMPDIR"] = str(tmp_path)
    assert LAYOUT.macros["ENV"] not in env
    # --redirects and --tee other than 0: torch 1.13's parser reads "0" as
    # None on Python 3.11 (its Std flag enum no longer lists NONE) and fails.
    # The workers' stdout goes to a file and, teed, to torchrun's.
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "--max_restarts=0", "--redirects=1", "--tee=1", f"--log_dir={tmp_path / 'logs'}",
                        str(script), os.path.join(PACKAGE_DIR, "cxxrun")],
                       env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    for rank in (0, 1):
        assert f"rank {rank} of 2: cxxrun off" in p.stdout
    assert "cxxrun:" not in p.stderr  # not a word from the package
