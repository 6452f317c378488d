#!/usr/bin/python3
"""Node health checks, measured (docs/node-health.md): what the checks cost a
healthy round (a launch and a restart, with and without checks, side by
side), and what a failed check at a restart costs the job: the restart with a spare
taking the bad node's place, against a restart where every node passes.

    /usr/bin/python3 bench/node_health.py [--cxxrun PATH] [--fake-nvml PATH] [--runs N]

Stdlib only. The GPU checks run against the build's fake NVML
(tests/fake_nvml) with 8 GPUs: NVML's own cost on a real driver is not in
these numbers. Times come from cxxrun's own log lines (millisecond stamps).
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
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EIGHT_GPUS = "".join(f"{i}.pci=00000000:{0x18 + 0x10 * i:02X}:00.0\n{i}.uuid=GPU-{i:08d}-0000-0000-0000-000000000000\n"
                     for i in range(8))


def stamp(line):
    m = re.match(r"\[(\d\d):(\d\d):(\d\d)\.(\d\d\d)\]", line)
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 1000 if m else None


def first(err, text, after=None):
    for line in err.splitlines():
        t = stamp(line)
        if text in line and t is not None and (after is None or t >= after):
            return t
    raise RuntimeError(f"no line with {text!r} in:\n{err}")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    env.update(extra)
    return env


def restart_ms(cxxrun, scratch, checks, env):
    """A worker fails once: from the restart line to attempt 1's workers."""
    marker = os.path.join(scratch, "failed-" + uuid.uuid4().hex)
    worker = os.path.join(scratch, "w.sh")
    with open(worker, "w") as f:
        f.write('#!/bin/sh\n[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3\nexit 0\n')
    os.chmod(worker, 0o755)
    t0 = time.monotonic()
    p = subprocess.run([cxxrun, "--max-restarts=1"] + checks + ["--no-python", worker], env=env,
                       capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    restart = first(p.stderr, "restarting, attempt 1")
    started = first(p.stderr, "(attempt 1,", after=restart)
    return (started - restart) * 1000, wall * 1000


def healthy_cost(cxxrun, fake, scratch, runs):
    state = os.path.join(scratch, "nvml-state")
    with open(state, "w") as f:
        f.write(EIGHT_GPUS)
    plain = env_with({})
    checked = env_with({"CXXRUN_NVML_LIBRARY": fake, "FAKE_NVML_STATE": state})
    flags = ["--health-check=true", f"--health-path={scratch}:1G"]
    rows = {"no checks": ([], plain), "command + path + 8 GPUs (fake NVML)": (flags, checked)}
    out = {}
    for name, (checks, env) in rows.items():
        restarts, walls = [], []
        for _ in range(runs):  # alternate so that noise hits both alike
            r, w = restart_ms(cxxrun, scratch, checks, env)
            restarts.append(r)
            walls.append(w)
        out[name] = (statistics.median(restarts), statistics.median(walls))
    return out


def reform(cxxrun, rdzv_server, scratch, bad_check):
    """Agents for --nnodes=2 with their store in cxxrun-rdzv; rank 0 fails
    once, and the job restarts. With `bad_check`, the first agent's check
    fails at that restart and a third agent, a spare, takes its place.
    Returns the ms from the steady agent's restart decision to the last
    of the new round's workers starting."""
    port = free_port()
    run_id = uuid.uuid4().hex[:12]
    server = subprocess.Popen([rdzv_server, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counter = os.path.join(scratch, "checks-" + run_id)
    worker = os.path.join(scratch, "pair.sh")
    with open(worker, "w") as f:
        f.write('#!/bin/sh\n[ "$RANK" = 0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && { sleep 0.3; exit 3; }\n'
                'sleep 0.3\n')
    os.chmod(worker, 0o755)
    check = (f"echo x >> {counter}; [ $(wc -l < {counter}) -lt 2 ] || {{ echo bad; exit 1; }}" if bad_check
             else "true")
    base = [cxxrun, "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
            "--nnodes=2", "--nproc-per-node=2", "--max-restarts=1"]
    env = env_with({})
    try:
        time.sleep(0.05)  # cxxrun-rdzv listening first
        procs = [subprocess.Popen(base + [f"--health-check={check}", worker], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True),
                 subprocess.Popen(base + ["--health-check=true", worker], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)]
        if bad_check:
            time.sleep(0.15)  # the spare comes once the first round is formed
            procs.append(subprocess.Popen(base + ["--health-check=true", worker], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
        errs = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        server.kill()
        server.wait()
    if (procs[0].returncode == 243) != bad_check:
        raise RuntimeError("unexpected exit codes: " + str([p.returncode for p in procs]) + "\n" + errs[0])
    decided = first(errs[1], "restarting, attempt 1")
    starts = []
    for e in errs[1:] if bad_check else errs:
        starts.append(max(stamp(line) for line in e.splitlines() if "starting 2 workers" in line and stamp(line)))
    return (max(starts) - decided) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxxrun", default=os.path.join(REPO, "build/bin/cxxrun"))
    ap.add_argument("--fake-nvml", default=os.path.join(REPO, "build/tests/fake_nvml/libnvidia-ml.so.1"))
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    rdzv_server = os.path.join(os.path.dirname(a.cxxrun), "cxxrun-rdzv")
    scratch = tempfile.mkdtemp(prefix="cxxrun_bench_health_")
    try:
        cost = healthy_cost(a.cxxrun, a.fake_nvml, scratch, a.runs)
        print(f"## A healthy round: a worker fails once, restart to attempt 1's workers (median of {a.runs})\n")
        print("| checks | restart (ms) | whole run (ms) |\n|---|---|---|")
        for name, (r, w) in cost.items():
            print(f"| {name} | {r:.1f} | {w:.0f} |")
        base, base_wall = cost["no checks"]
        for name, (r, w) in cost.items():
            if name != "no checks":
                print(f"\nchecks add {r - base:.1f} ms to a restart (log stamps: 1 ms resolution), "
                      f"{w - base_wall:.0f} ms to the whole run ({w / base_wall:.2f}x)")
        rows = []
        for _ in range(a.runs):  # alternate so that noise hits both alike
            rows.append((reform(a.cxxrun, rdzv_server, scratch, False), reform(a.cxxrun, rdzv_server, scratch, True)))
        healthy = statistics.median(r[0] for r in rows)
        replaced = statistics.median(r[1] for r in rows)
        print(f"\n## A restart of 2 nodes x 2 workers: the restart decision to the new round's workers running "
              f"(median of {a.runs})\n")
        print("| restart | ms |\n|---|---|")
        print(f"| every node passes its checks | {healthy:.0f} |")
        print(f"| one node fails its check; a waiting spare takes its place | {replaced:.0f} |")
        print(f"\na failed check costs the job {replaced - healthy:+.0f} ms ({replaced / healthy:.2f}x)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
