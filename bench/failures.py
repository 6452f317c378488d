#!/usr/bin/python3
"""Every death explained, measured: each failure kind under cxxrun and under
torchrun 1.13, what the launcher's summary said about it, its exit code, and
the time from the fault to the launcher's exit.

Run as root on a host with the cgroup v1 memory and freezer hierarchies (the
hybrid layout): the OOM kind runs the launcher in a v1 memory cgroup limited
to 128 MiB, the D-state kind freezes a worker in a v1 freezer cgroup. A kind
that cannot run here is reported as skipped. Stdlib only.

    /usr/bin/python3 bench/failures.py [--runs N] [--cxxrun PATH] [--kinds a,b]

Each kind runs a 2-worker job; rank 1 meets the fault and writes the time
just before it (CLOCK_REALTIME) to a file; the fault -> exit time is the
launcher's exit minus that stamp (for the hang kinds it includes the 1 s
detection timeout). The summary column is the line a user reads first:
cxxrun's `cause` line, torchrun's `exitcode`/`traceback` lines.
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests/integration"))
from harness import own_v1_cgroup as own_v1, remove_cgroup_tree as rmtree_cgroup  # noqa: E402  (the tests' helpers)
TORCHRUN = [sys.executable, os.path.join(REPO, "bench/torchrun113.py"), "--monitor_interval=0.1"]
LIMIT = 30  # s: a launcher still running then is reported as "still running"

# Rank 1's fault, after a stamp; rank 0 just lives on.
WORKER = r"""
import ctypes, os, sys, time
kind, out = sys.argv[1], sys.argv[2]
def stamp():
    with open(os.path.join(out, "fault"), "w") as f:
        f.write(repr(time.time()))
if os.environ["RANK"] != "1":
    time.sleep(60)
    sys.exit(0)
time.sleep(0.5)
if kind == "exception":
    stamp(); raise ValueError("bad batch")
if kind == "exit":
    stamp(); sys.exit(3)
if kind == "segfault":
    stamp(); ctypes.string_at(0)
if kind == "oom":
    stamp()
    block = bytearray(1 << 30)
    for i in range(0, len(block), 4096):
        block[i] = 1
if kind == "file-timer":
    import torch.distributed.elastic.timer as timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    with timer.expires(after=1):
        stamp(); time.sleep(120)
if kind in ("kill", "frozen"):
    with open(os.path.join(out, "pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
"""

KINDS = ["exception", "exit", "segfault", "kill", "oom", "file-timer", "frozen"]
DESCRIPTION = {
    "exception": "Python exception (no `@record`)",
    "exit": "`sys.exit(3)`",
    "segfault": "segfault in C (`ctypes.string_at(0)`)",
    "kill": "an admin's `kill -9` of the rank",
    "oom": "OOM kill: rank 1 allocates 1 GiB, the job runs in a 512 MiB v1 memory cgroup (torchrun's agent alone takes about 230 MiB)",
    "file-timer": "hang: torch file timer, 1 s",
    "frozen": "rank 1 frozen (v1 freezer: a D state), then rank 0 dies: the launcher must stop rank 1",
}


def summary_line(launcher, err):
    """What the user reads first about the root cause."""
    root = err[err.find("Root Cause"):] if "Root Cause" in err else err
    if launcher == "cxxrun":
        # An unkillable worker decides the exit code wherever it is listed.
        stuck = re.search(r"cause     : (unkillable.*)", err)
        m = stuck or re.search(r"cause     : (.*)", root)
        return m.group(1).strip() if m else "(no summary)"
    code = re.search(r"exitcode\s*: (.*)", root)
    tb = re.search(r"traceback\s*: (.*)", root)
    parts = [p.group(1).strip() for p in (code, tb) if p]
    return "; ".join(parts) if parts else "(no summary)"


def run_once(launcher, kind, cxxrun, scratch):
    out = tempfile.mkdtemp(dir=scratch)
    worker = os.path.join(out, "w.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=out, PET_MASTER_PORT=str(29500 + os.getpid() % 1000))
    env.pop("PYTHONFAULTHANDLER", None)
    if kind == "file-timer":
        env["TORCHELASTIC_ENABLE_FILE_TIMER"] = "1"
    if launcher == "cxxrun":
        cmd = [cxxrun, "--nproc-per-node=2", "--shutdown-timeout=2", "--kill-timeout=2"]
        if kind == "segfault":
            cmd.append("--no-python")
            cmd += [sys.executable, worker, kind, out]
        else:
            env["PYTHON_EXEC"] = sys.executable
            cmd += [worker, kind, out]
    else:
        env["TORCHELASTIC_SHUTDOWN_TIMEOUT"] = "2"  # not read by 1.13; its stop waits 30 s
        cmd = TORCHRUN + ["--nproc_per_node=2", worker, kind, out]
    memory = freezer = None
    if kind == "oom":
        memory = os.path.join(own_v1("memory"), f"cxxrun-bench-{uuid.uuid4().hex[:8]}")
        os.mkdir(memory)
        with open(os.path.join(memory, "memory.limit_in_bytes"), "w") as f:
            f.write(str(512 << 20))
        cmd = ["sh", "-c", f'echo $$ > {memory}/cgroup.procs && exec "$@"', "sh"] + cmd
    err_text = [""]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, cwd=out, start_new_session=True)
    try:
        pid_file = os.path.join(out, "pid")
        if kind in ("kill", "frozen"):
            deadline = time.monotonic() + 30
            while not (os.path.exists(pid_file) and os.path.getsize(pid_file)) and time.monotonic() < deadline:
                time.sleep(0.01)
            pid = int(open(pid_file).read())
            if kind == "kill":
                with open(os.path.join(out, "fault"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(pid, signal.SIGKILL)
            else:
                freezer = os.path.join(own_v1("freezer"), f"cxxrun-bench-{uuid.uuid4().hex[:8]}")
                os.mkdir(freezer)
                with open(os.path.join(freezer, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
                with open(os.path.join(freezer, "freezer.state"), "w") as f:
                    f.write("FROZEN")
                time.sleep(0.2)
                # The fault the launcher must survive: rank 0 fails, rank 1 cannot be stopped.
                rank0 = [q for q in children_with_rank(p.pid, "0")]
                with open(os.path.join(out, "fault"), "w") as f:
                    f.write(repr(time.time()))
                for q in rank0:
                    os.kill(q, signal.SIGUSR2)  # default action: exit
        try:
            _, err = p.communicate(timeout=LIMIT)
            ended = time.time()
            rc = p.returncode
        except subprocess.TimeoutExpired:
            ended, rc = None, None
            kill_job(p, out)
            if freezer:  # the frozen worker holds the launcher's stderr until it can die
                thaw(freezer)
            _, err = p.communicate(timeout=10)
        err_text[0] = err or ""
        fault = float(open(os.path.join(out, "fault")).read()) if os.path.exists(os.path.join(out, "fault")) else None
        seconds = ended - fault if ended and fault else None
        return rc, seconds, summary_line(launcher, err or "")
    finally:
        kill_job(p, out)
        if freezer:
            thaw(freezer)
            time.sleep(0.3)
            rmtree_cgroup(freezer)
        if memory:
            time.sleep(0.3)
            rmtree_cgroup(memory)
        # What an agent had to leave behind (its frozen worker's cgroups).
        for left in re.findall(r"leaving cgroup (\S+) behind", err_text[0]):
            rmtree_cgroup(left)
            if own_v1("memory"):
                rmtree_cgroup(os.path.join(own_v1("memory"), os.path.basename(left)))
        shutil.rmtree(out, ignore_errors=True)


def thaw(freezer):
    with open(os.path.join(freezer, "freezer.state"), "w") as f:
        f.write("THAWED")


def kill_job(p, out):
    """The launcher's session and every process of this run (its workers
    carry the run's scratch dir in their command line), wherever they went."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if out.encode() in f.read():
                        os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def children_with_rank(root, rank):
    """Pids of the launcher's descendants whose environment says RANK=rank
    and run the bench worker."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and b"w.py" in cmd:
            found.append(int(name))
    return found


def can_run(kind):
    if kind == "oom" and (os.geteuid() != 0 or not own_v1("memory")):
        return "needs root and a v1 memory hierarchy"
    if kind == "frozen" and (os.geteuid() != 0 or not own_v1("freezer")):
        return "needs root and a v1 freezer hierarchy"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cxxrun", default=os.environ.get("CXXRUN", os.path.join(REPO, "build/bin/cxxrun")))
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="cxxrun_failures_")
    rows = []
    try:
        for kind in args.kinds.split(","):
            why_not = can_run(kind)
            if why_not:
                rows.append((kind, None, None, why_not))
                continue
            cells = {}
            for launcher in ("cxxrun", "torchrun"):
                results = [run_once(launcher, kind, args.cxxrun, scratch) for _ in range(args.runs)]
                times = [s for _, s, _ in results if s is not None]
                codes = sorted({str(rc) if rc is not None else f"still running at {LIMIT} s" for rc, _, _ in results})
                cells[launcher] = (", ".join(codes), statistics.median(times) if times else None, results[-1][2])
                print(f"[failures] {kind:10s} {launcher:8s} exit {cells[launcher][0]}, "
                      f"{cells[launcher][1]}, {cells[launcher][2]}", file=sys.stderr)
            rows.append((kind, cells["cxxrun"], cells["torchrun"], None))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def secs(v):
        return "—" if v is None else (f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s")

    print(f"| failure | launcher | exit code | fault → exit (median of {args.runs}) | what the summary says |")
    print("|---|---|---:|---:|---|")
    for kind, cx, tr, why_not in rows:
        if why_not:
            print(f"| {DESCRIPTION[kind]} | both | — | — | skipped: {why_not} |")
            continue
        for name, (codes, t, said) in (("cxxrun", cx), ("torchrun 1.13", tr)):
            said = said.replace("|", "\\|")
            print(f"| {DESCRIPTION[kind] if name == 'cxxrun' else ''} | {name} | {codes} | {secs(t)} | {said} |")


if __name__ == "__main__":
    main()
