#!/usr/bin/python3
"""Unmodified torch jobs (Debian torch 1.13) under cxxrun and torchrun, side by side.

Four columns: cxxrun's default (no --start-method: the first attempt by
exec, restarts forked from a zygote that learned what the workers import),
cxxrun --start-method=forkserver, cxxrun --start-method=spawn (an exec per
worker, every attempt) and torchrun.

  no torch     4 workers of a script that imports nothing but os and
                sys: time to the first line it prints (a default must not
                make it slower).
  gloo job      4 workers, init_process_group("gloo") + all_reduce
                (tests/integration/torch_jobs/allreduce.py): time from the
                launcher's start to the first line a worker prints, and total
                wall time.
  crash/resume  DDP with DistributedSampler, 4 workers, rank 2 crashes at
                step 5 on the first attempt, --max-restarts=1
                (tests/integration/torch_jobs/ddp_train.py): time from the
                crash message to the first "resumed from" line, and total.

torchrun 1.13 runs through bench/torchrun113.py (fixes 1.13's Std.from_str on
Python 3.11), a newer torch as `python -m torch.distributed.run`, both with
--monitor_interval=0.1. Both launchers run the workers with PYTHON_EXEC=--python.

With --nproc N every job runs N workers (4 by default); the crash is rank
min(2, N-1)'s, at the same point of its second epoch.

Usage: bench/torch_jobs.py [--runs N] [--build build] [--python /usr/bin/python3] [--nproc 4]
"""
import argparse
import functools
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "..", "tests", "integration", "torch_jobs")


def timed_lines(cmd, env, timeout=120):
    """Runs cmd; returns (rc, [(seconds since start, stream, line)], wall seconds)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, "out")
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    lines, partial = [], {"out": b"", "err": b""}
    deadline = start + timeout
    while sel.get_map():
        if time.monotonic() > deadline:
            p.kill()
            break
        for key, _ in sel.select(timeout=1):
            chunk = os.read(key.fileobj.fileno(), 65536)
            now = time.monotonic() - start
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            data = partial[key.data] + chunk
            *complete, partial[key.data] = data.split(b"\n")
            lines += [(now, key.data, l.decode(errors="replace")) for l in complete]
    rc = p.wait(timeout=30)
    return rc, lines, time.monotonic() - start


PYTHON = "/usr/bin/python3"


@functools.lru_cache
def torch_version(python):
    return subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True, timeout=120).stdout.strip()


KINDS = ("default", "forkserver", "spawn", "torchrun")
LATE_AT = []  # when the default's crashes came, seconds after its start
METHOD = {"default": [], "forkserver": ["--start-method=forkserver"], "spawn": ["--start-method=spawn"]}


def launcher(kind, build, nproc, extra, script, args):
    if kind in METHOD:
        method = METHOD[kind]
        return [os.path.join(build, "bin", "cxxrun"), "--standalone", f"--nproc-per-node={nproc}", *method, *extra,
                script, *args]
    extra = [e.replace("--max-restarts", "--max_restarts") for e in extra]
    torchrun = [os.path.join(HERE, "torchrun113.py")] if torch_version(PYTHON).startswith("1.13") else [
        "-m", "torch.distributed.run"]
    return [PYTHON, *torchrun, "--standalone", f"--nproc_per_node={nproc}",
            "--monitor_interval=0.1", *extra, script, *args]


def plain_job(kind, build, scratch, nproc=4):
    script = os.path.join(scratch, "plain.py")
    with open(script, "w") as f:
        f.write('import os, sys\nprint("hello from", os.environ["RANK"], flush=True)\n')
    rc, lines, wall = timed_lines(launcher(kind, build, nproc, [], script, []),
                                  dict(os.environ, PYTHON_EXEC=PYTHON, TMPDIR=scratch))
    first = next((t for t, s, l in lines if s == "out" and "hello from" in l), None)
    return first if rc == 0 else None


def gloo_job(kind, build, scratch, nproc=4):
    rc, lines, wall = timed_lines(launcher(kind, build, nproc, [], os.path.join(JOBS, "allreduce.py"), []),
                                  dict(os.environ, PYTHON_EXEC=PYTHON, TMPDIR=scratch))
    first = next((t for t, s, l in lines if s == "out" and "sum" in l), None)
    return (first, wall) if rc == 0 else (None, None)


def crash_job(kind, build, scratch, step=5, epochs=3, nproc=4):
    # Step 5 of 4 workers is the second epoch's first (512 samples, batches of 32).
    step = step if nproc == 4 else step * 4 // nproc
    ckpt = os.path.join(scratch, f"ckpt_{kind}.pt")
    if os.path.exists(ckpt):
        os.remove(ckpt)
    rc, lines, wall = timed_lines(
        launcher(kind, build, nproc, ["--max-restarts=1"], os.path.join(JOBS, "ddp_train.py"),
                 ["--checkpoint", ckpt, "--epochs", str(epochs), "--crash-rank", str(min(2, nproc - 1)), "--crash-step", str(step)]),
        dict(os.environ, PYTHON_EXEC=PYTHON, TMPDIR=scratch))
    crash = next((t for t, s, l in lines if f"crashes at step {step}" in l), None)
    if kind == "default" and crash is not None:
        LATE_AT.append(crash)
    resumed = next((t for t, s, l in lines if "resumed from epoch" in l), None)
    if rc != 0 or crash is None or resumed is None:
        return None, None
    return resumed - crash, wall


def first_lines(build, nproc, runs):
    """First lines only, `runs` times alternating: the gloo job's under the
    default on the script (which imports torch at its top level: forked from
    the first attempt), under the default on the same job run as `-m
    allreduce` (learned: the first attempt exec'd) and under spawn; then a
    script without torch's under the default (never a zygote) and spawn."""
    cxxrun = [os.path.join(build, "bin", "cxxrun"), "--standalone", f"--nproc-per-node={nproc}"]
    script = os.path.join(JOBS, "allreduce.py")
    modes = {"default (script)": cxxrun + [script], "default (-m, learned)": cxxrun + ["-m", "allreduce"],
             "spawn": cxxrun + ["--start-method=spawn", script]}
    gloo = {k: [] for k in modes}
    plain = {"default": [], "spawn": []}
    scratch = tempfile.mkdtemp(prefix="cxxrun_bench_torch_")
    env = dict(os.environ, PYTHON_EXEC=PYTHON, TMPDIR=scratch, PYTHONPATH=JOBS)
    try:
        for _ in range(runs):
            for name, cmd in modes.items():
                rc, lines, _ = timed_lines(cmd, env)
                gloo[name].append(next((t for t, s, l in lines if s == "out" and "sum" in l), None) if rc == 0 else None)
        for _ in range(runs):
            for kind, values in plain.items():
                values.append(plain_job(kind, build, scratch, nproc))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"| {nproc} workers: first line ({runs} runs) | median | mean |")
    print("|---|---:|---:|")
    rows = [(f"gloo job, {k}", v) for k, v in gloo.items()] + [(f"script without torch, {k}", v) for k, v in plain.items()]
    for name, values in rows:
        v = [x for x in values if x is not None]
        print(f"| {name} | {statistics.median(v):.4f} s | {statistics.mean(v):.4f} s |" if v else f"| {name} | FAILED | |")


def fmt(values):
    v = [x for x in values if x is not None]
    return f"{statistics.median(v):.2f} s" if v else "FAILED"


def ratio(a, b):
    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    return f"{statistics.median(b) / statistics.median(a):.2f}x" if a and b else "-"


def main():
    global PYTHON
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--python", default=PYTHON, help="the python with torch, for workers and torchrun")
    ap.add_argument("--nproc", type=int, default=4, help="workers of every job (the crash: rank min(2, N-1))")
    ap.add_argument("--first-lines", type=int, metavar="RUNS",
                    help="only first lines, RUNS times: the gloo job's (the default forked, learned, spawn) and a "
                         "script without torch's (the default, spawn)")
    args = ap.parse_args()
    n = args.nproc
    PYTHON = args.python
    if args.first_lines:
        return first_lines(args.build, n, args.first_lines)
    version = torch_version(PYTHON)
    scratch = tempfile.mkdtemp(prefix="cxxrun_bench_torch_")
    res = {k: {"plain": [], "first": [], "wall": [], "restart": [], "crash_wall": [], "late": []} for k in KINDS}
    try:
        for _ in range(args.runs):
            for kind in KINDS:  # alternate so machine noise hits all
                res[kind]["plain"].append(plain_job(kind, args.build, scratch, n))
                first, wall = gloo_job(kind, args.build, scratch, n)
                res[kind]["first"].append(first)
                res[kind]["wall"].append(wall)
                restart, crash_wall = crash_job(kind, args.build, scratch, nproc=n)
                res[kind]["restart"].append(restart)
                res[kind]["crash_wall"].append(crash_wall)
                # The same crash a few seconds in, as real ones come: by then
                # the default's forkserver has imported beside the workers.
                res[kind]["late"].append(crash_job(kind, args.build, scratch, step=300, epochs=80, nproc=n)[0])
                print(f"{kind}: first line {first}, wall {wall}, restart {restart}, crash job wall {crash_wall}",
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    d, f, c, t = res["default"], res["forkserver"], res["spawn"], res["torchrun"]
    print(f"| measure (median of {args.runs}, torch {version}) | cxxrun default | cxxrun forkserver | cxxrun spawn "
          "| torchrun | torchrun / default | spawn / default |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key, name in (("plain", f"script without torch, {n} workers: time to first line"),
                      ("first", f"gloo job, {n} workers: time to first user line"),
                      ("wall", f"gloo job, {n} workers: total wall time"),
                      ("restart", f"crash at step {5 * 4 // n} -> first 'resumed from' line"),
                      ("crash_wall", "crash-and-resume job: total wall time"),
                      ("late", f"crash at step {300 * 4 // n} -> first 'resumed from' line")):
        print(f"| {name} | {fmt(d[key])} | {fmt(f[key])} | {fmt(c[key])} | {fmt(t[key])} | {ratio(d[key], t[key])} "
              f"| {ratio(d[key], c[key])} |")
    if LATE_AT:
        print(f"\nThe crashes at step {5 * 4 // n} and {300 * 4 // n} came {min(LATE_AT):.1f}-{max(LATE_AT):.1f} s after the default's start.")


if __name__ == "__main__":
    main()
