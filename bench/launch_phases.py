#!/usr/bin/env python3
"""Where a launch's time goes: `cxxrun --standalone --nproc-per-node=8
--no-python true`, start to exit, per phase, for one binary or two side by
side (alternated run by run, so a drift of the machine's speed hits both).

The phases are read from the outside, from the system calls the kernel saw
(`perf trace`, a few calls only), so any binary can be measured, an old one
included, without building anything into it:

  config      process start (its first brk) -> the launcher's first log line
  health      -> the first mkdir (the run directory): subreaper, limits,
                 the node health gate
  setup       -> the guardian's fork: run directory, job cgroup, the Python
                 hook, the memory cgroup for the post-mortem
  rendezvous  -> the first worker's clone: the workers' store, the join,
                 the supervisor, the attempt's cgroups and directories
  spawn       -> the last worker's exec returned
  exited      -> the agent reaped the last worker
  teardown    -> the agent's exit_group: verdict, goodput, lines, guardian,
                 cgroups and directories removed

The trace slows every traced call, so the phases add up to more than the
untraced launch; the whole-process wall time, untraced, is measured too, the
way bench/bench.py does (a pidfd wait around the process), alternated the same
way. Medians of each, and new/old ratios.

  /usr/bin/python3 bench/launch_phases.py --cxxrun build/bin/cxxrun \
      --baseline /path/to/old/cxxrun --runs 30

Root (perf trace). Stdlib only.
"""
import argparse
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PHASES = ["config", "health", "setup", "rendezvous", "spawn", "exited", "teardown"]
TRACED = "brk,write,mkdir,clone,clone3,execve,wait4,exit_group"
LINE = re.compile(r"^\s*([\d.]+|\?) \(\s*([\d.]*)\s*(?:ms)?\s*\): (\S*)/(\d+)\s+(.*)$")
RET = re.compile(r"=\s+(-?\d+)")


def argv_for(binary, nproc):
    return [binary, "--standalone", f"--nproc-per-node={nproc}", "--no-python", "true"]


def parse(path):
    """The landmarks of one trace, in ms since the agent's first traced call."""
    main = None
    first = None
    config = health = guardian = exit_group = None
    clones = {}  # pid returned -> when its clone began (the agent's clone3 calls)
    pending = None  # an unfinished clone3 of the agent
    execs = {}  # pid -> when its exec returned
    exec_began = {}  # pid -> when its last execve began
    reaped = {}  # pid -> when the agent reaped it
    seen = {}  # pid -> its first traced call (a clone3 perf could not pair)
    with open(path) as f:
        for raw in f:
            m = LINE.match(raw)
            if not m:
                continue
            t, dur, comm, pid, call = m.group(1), m.group(2), m.group(3), int(m.group(4)), m.group(5)
            if main is None:
                main = pid  # the workload's own process comes first
            start = None if t == "?" else float(t)
            end = start + float(dur) if start is not None and dur else start
            cont = call.startswith("... [continued]:")
            name = call.split(":", 1)[1].strip() if cont else call
            if pid == main and first is None and start is not None:
                first = start
            ret = RET.search(call)
            if start is not None:
                seen.setdefault(pid, start)
            if pid == main:
                if name.startswith("write(fd: 2") and config is None and start is not None:
                    config = start
                elif name.startswith("mkdir(") and health is None and not cont:
                    health = start
                elif name.startswith("clone(") and guardian is None and not cont:
                    guardian = start
                elif name.startswith("clone3("):
                    if not cont and call.rstrip().endswith("..."):
                        pending = start
                    elif ret:
                        clones[int(ret.group(1))] = pending if cont else start
                        pending = None
                elif name.startswith("wait4(") and ret and start is not None:
                    reaped[int(ret.group(1))] = end
                elif name.startswith("exit_group("):
                    exit_group = start
            elif name.startswith("execve("):
                if start is not None and not cont:
                    exec_began[pid] = start
                if ret and ret.group(1) == "0":
                    # A continued line may come without its time: the call's
                    # start, then, is the last one seen.
                    execs[pid] = end if end is not None else exec_began.get(pid)
    workers = [p for p in execs if execs[p] is not None and (p in clones or p in seen)]
    marks = [first, config, health, guardian,
             min((clones.get(p) if clones.get(p) is not None else seen[p] for p in workers), default=None),
             max((execs[p] for p in workers), default=None),
             max((reaped.get(p, -1) for p in workers), default=None),
             exit_group]
    if any(x is None for x in marks) or not workers or marks[6] < 0:
        raise ValueError(f"{path}: a landmark is missing ({marks}, {len(workers)} workers)")
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(PHASES)}, len(workers)


def traced_run(perf, binary, nproc, scratch, i, label):
    out = os.path.join(scratch, f"{label}.{i}.trace")
    cmd = [perf, "trace", "-e", TRACED, "-o", out, "--"] + argv_for(binary, nproc)
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=scratch, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}")
    try:
        phases, n = parse(out)
    except ValueError as e:
        print(f"launch_phases.py: run left out: {e}", file=sys.stderr)
        return None
    os.unlink(out)
    if n != nproc:  # perf lost a worker's calls: the run says nothing sure
        print(f"launch_phases.py: run left out: {n} workers seen in the trace, {nproc} expected", file=sys.stderr)
        return None
    return phases


def wall_run(binary, nproc, scratch):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv_for(binary, nproc), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=scratch, start_new_session=True)
    fd = os.pidfd_open(p.pid)
    try:
        if not _wait_fd(fd, 60):
            p.kill()
            raise RuntimeError(f"{binary}: no exit within 60 s")
    finally:
        os.close(fd)
    rc = p.wait()
    wall = (time.perf_counter() - t0) * 1000
    if rc != 0:
        raise RuntimeError(f"{binary} exited {rc}")
    return wall


def _wait_fd(fd, timeout):
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cxxrun", required=True, help="the binary measured (new)")
    ap.add_argument("--baseline", help="a binary to measure beside it (old)")
    ap.add_argument("--runs", type=int, default=30, help="traced runs of each (default 30)")
    ap.add_argument("--wall-runs", type=int, default=None, help="untraced runs of each (default: --runs)")
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--perf", default=shutil.which("perf") or "perf")
    args = ap.parse_args()
    if args.runs < 1 or (args.wall_runs is not None and args.wall_runs < 1):
        print(f"launch_phases.py: --runs {args.runs} / --wall-runs {args.wall_runs}: each must be at least 1",
              file=sys.stderr)
        sys.exit(2)
    for label, path in [("--cxxrun", args.cxxrun), ("--baseline", args.baseline)]:
        if path is not None and not os.access(path, os.X_OK):
            print(f"launch_phases.py: {label} {path}: not an executable file", file=sys.stderr)
            sys.exit(2)
    binaries = [("new", args.cxxrun)] + ([("old", args.baseline)] if args.baseline else [])
    scratch = tempfile.mkdtemp(prefix="cxxrun-phases.")
    # Copies: a rebuild meanwhile cannot swap the binary under the runs.
    copies = {}
    for label, path in binaries:
        copies[label] = os.path.join(scratch, f"cxxrun-{label}")
        shutil.copy2(path, copies[label])
    phases = {label: {p: [] for p in PHASES} for label, _ in binaries}
    walls = {label: [] for label, _ in binaries}
    left_out = {label: 0 for label, _ in binaries}
    try:
        for label, _ in binaries:  # warm-up, not counted
            wall_run(copies[label], args.nproc, scratch)
        for i in range(args.runs):
            order = binaries if i % 2 == 0 else list(reversed(binaries))
            for label, _ in order:
                got = traced_run(args.perf, copies[label], args.nproc, scratch, i, label)
                if got is None:
                    left_out[label] += 1
                    continue
                for p in PHASES:
                    phases[label][p].append(got[p])
        for i in range(args.wall_runs if args.wall_runs is not None else args.runs):
            order = binaries if i % 2 == 0 else list(reversed(binaries))
            for label, _ in order:
                walls[label].append(wall_run(copies[label], args.nproc, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    med = statistics.median
    labels = [label for label, _ in binaries]
    if args.baseline:
        print("| phase | old (median ms) | new (median ms) | new/old |")
        print("|---|---:|---:|---:|")
    else:
        print("| phase | median ms |")
        print("|---|---:|")
    for p in PHASES + ["sum of phases (traced)", "whole process, untraced"]:
        if p in PHASES:
            v = {label: med(phases[label][p]) for label in labels}
        elif p.startswith("sum"):
            v = {label: med([sum(phases[label][q][i] for q in PHASES) for i in range(len(phases[label][PHASES[0]]))])
                 for label in labels}
        else:
            v = {label: med(walls[label]) for label in labels}
        if args.baseline:
            ratio = v["new"] / v["old"] if v["old"] > 0 else float("nan")
            print(f"| {p} | {v['old']:.2f} | {v['new']:.2f} | {ratio:.2f} |")
        else:
            print(f"| {p} | {v['new']:.2f} |")
    print()
    print(f"{args.runs} traced runs and {len(walls['new'])} untraced runs of each, alternated; "
          f"traced with `perf trace -e {TRACED}`; traces left out (a worker's calls lost): "
          + ", ".join(f"{label} {left_out[label]}" for label in labels) + ".")
    for label, path in binaries:
        print(f"- {label}: `{' '.join(argv_for(path, args.nproc))}`; untraced wall min {min(walls[label]):.2f}, "
              f"max {max(walls[label]):.2f} ms")


if __name__ == "__main__":
    main()
