#!/usr/bin/python3
"""Hangs, measured (docs/hangs.md): how long after a job stops progressing
cxxrun's --hang-timeout gives its verdict (against the bound), how long
taking every rank's stack takes at 4 and 64 workers, and what the stack-dump
hook costs a Python worker's start and a cxxrun launch and restart.

    /usr/bin/python3 bench/hangs.py [--cxxrun PATH] [--runs N]

Stdlib only. Times come from cxxrun's own log lines (millisecond stamps) and
from a CLOCK_REALTIME stamp each worker writes when it wedges.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every rank wedges on an Event after writing when it did; rank 0 last.
WEDGE = r"""
import os, sys, threading, time
out = sys.argv[1]
time.sleep(0.5 if os.environ["RANK"] == "0" else 0.2)
with open(os.path.join(out, "wedged." + os.environ["RANK"]), "w") as f:
    f.write(repr(time.time()))
threading.Event().wait()
"""


def stamp(line):
    """Seconds of the day from a log line's [HH:MM:SS.mmm]."""
    m = re.match(r"\[(\d\d):(\d\d):(\d\d)\.(\d\d\d)\]", line)
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 1000 if m else None


def day_seconds(t):
    lt = time.localtime(t)
    return lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (t % 1)


def one_hang(cxxrun, nproc, timeout, scratch):
    out = tempfile.mkdtemp(dir=scratch)
    worker = os.path.join(out, "w.py")
    with open(worker, "w") as f:
        f.write(WEDGE)
    env = dict(os.environ, PYTHON_EXEC=sys.executable, TMPDIR=out)
    p = subprocess.run([cxxrun, f"--nproc-per-node={nproc}", f"--hang-timeout={timeout}", f"--log-dir={out}/logs",
                        worker, out], env=env, capture_output=True, text=True, timeout=300)
    lines = p.stderr.splitlines()
    verdict = next(stamp(l) for l in lines if "job hung:" in l)
    picture = next(stamp(l) for l in lines if "] hang: " in l or "error: hang: " in l)
    wedged = max(float(open(os.path.join(out, n)).read()) for n in os.listdir(out) if n.startswith("wedged."))
    shutil.rmtree(out, ignore_errors=True)
    return p.returncode, verdict - day_seconds(wedged), picture - verdict


def python_start(env, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def launch(cxxrun, args, runs, scratch):
    times = []
    env = dict(os.environ, PYTHON_EXEC=sys.executable, TMPDIR=scratch)
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([cxxrun] + args, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxxrun", default=os.environ.get("CXXRUN", os.path.join(REPO, "build/bin/cxxrun")))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="cxxrun_hangs_")
    try:
        print("| workers | --hang-timeout | exit | last wedge → verdict (median) | over the bound | "
              "taking every stack (median) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for nproc, timeout in ((4, 2), (4, 5), (64, 5)):
            runs = [one_hang(args.cxxrun, nproc, timeout, scratch) for _ in range(args.runs)]
            codes = sorted({rc for rc, _, _ in runs})
            detect = statistics.median(d for _, d, _ in runs)
            collect = statistics.median(c for _, _, c in runs)
            print(f"| {nproc} | {timeout} s | {', '.join(map(str, codes))} | {detect:.2f} s | {detect - timeout:+.2f} s "
                  f"| {collect * 1000:.0f} ms |", flush=True)

        # The hook: a Python start with cxxrun's sitecustomize (faulthandler
        # registered, the shadowed sitecustomize chained) and without.
        hook = os.path.join(scratch, "hook")
        os.makedirs(hook)
        probe = subprocess.run([args.cxxrun, "--nproc-per-node=1", f"--log-dir={scratch}/logs", "--no-python", "sh",
                                "-c", "echo $PYTHONPATH; echo $CXXRUN_STACK_FILE"], capture_output=True, text=True,
                               env=dict(os.environ, TMPDIR=scratch))
        lines = [l.split(":", 1)[1] if l.startswith("[") else l for l in probe.stdout.splitlines()]
        hook_dir = lines[0].split(":")[0]
        shutil.copytree(hook_dir, hook, dirs_exist_ok=True)
        plain = dict(os.environ)
        hooked = dict(os.environ, PYTHONPATH=hook, CXXRUN_STACK_FILE=os.path.join(scratch, "stacks.txt"),
                      CXXRUN_STACK_SIGNAL="37")
        runs = max(20, args.runs)
        a, b = python_start(plain, runs), python_start(hooked, runs)
        print(f"\npython3 -c pass, median of {runs}: {a * 1000:.1f} ms plain, {b * 1000:.1f} ms with the hook "
              f"({b / a:.2f}×, +{(b - a) * 1000:.1f} ms)")
        prog = ["--standalone", "--nproc-per-node=8", os.path.join(scratch, "ok.py")]
        with open(prog[-1], "w") as f:
            f.write("pass\n")
        nolog = launch(args.cxxrun, ["--log-dir=/dev/null"] + prog, runs, scratch)
        logged = launch(args.cxxrun, prog, runs, scratch)
        print(f"cxxrun --nproc-per-node=8 (Python workers doing nothing), median of {runs}: {nolog * 1000:.1f} ms "
              f"without a log dir (no hook), {logged * 1000:.1f} ms with one and the hook ({logged / nolog:.2f}×)")
        restart = ["--standalone", "--nproc-per-node=4", "--max-restarts=1", os.path.join(scratch, "fail_once.py")]
        with open(restart[-1], "w") as f:
            f.write("import os, sys\nsys.exit(3 if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' and "
                    "os.environ['RANK'] == '0' else 0)\n")
        nolog = launch(args.cxxrun, ["--log-dir=/dev/null"] + restart, runs, scratch)
        logged = launch(args.cxxrun, restart, runs, scratch)
        print(f"a job with one restart (4 Python workers), median of {runs}: {nolog * 1000:.1f} ms without the hook, "
              f"{logged * 1000:.1f} ms with it ({logged / nolog:.2f}×)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
