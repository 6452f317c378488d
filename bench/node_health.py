#!/usr/bin/python3
"""Node health checks, measured (docs/node-health.md): what the checks cost a
healthy round (a launch and a restart, with and without checks, side by
side), and what a failed check at a restart costs the job: from the bad node's
verdict to the workers running with the spare in its place.

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


def spare_takeover(cxxrun, rdzv_server, scratch):
    """3 agents for --nnodes=2 and a store in cxxrun-rdzv; a member's check
    fails at the restart: from its verdict to the job's workers running
    with the spare in its place. (Before the first round a bad node costs
    nothing: it never joins, and the round forms from the others.)"""
    port = free_port()
    run_id = uuid.uuid4().hex[:12]
    server = subprocess.Popen([rdzv_server, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counter = os.path.join(scratch, "checks-" + run_id)
    worker = os.path.join(scratch, "pair.sh")
    with open(worker, "w") as f:
        f.write('#!/bin/sh\n[ "$RANK" = 0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && { sleep 0.3; exit 3; }\n'
                'sleep 0.3\n')
    os.chmod(worker, 0o755)
    check = f"echo x >> {counter}; [ $(wc -l < {counter}) -lt 2 ] || {{ echo bad; exit 1; }}"
    base = [cxxrun, "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
            "--nnodes=2", "--nproc-per-node=2", "--max-restarts=1"]
    env = env_with({})
    try:
        bad = subprocess.Popen(base + [f"--health-check={check}", worker], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        others = [subprocess.Popen(base + [worker], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)]
        time.sleep(0.15)  # the spare comes once the first round is formed
        others.append(subprocess.Popen(base + [worker], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True))
        errs = [p.communicate(timeout=120)[1] for p in [bad] + others]
    finally:
        server.kill()
        server.wait()
    if bad.returncode != 243:
        raise RuntimeError("the bad node did not step out:\n" + errs[0])
    verdict = first(errs[0], "failed: bad")
    starts = [first(e, "starting 2 workers", after=verdict) for e in errs[1:]]
    return (max(starts) - verdict) * 1000


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
        base = cost["no checks"][0]
        for name, (r, _) in cost.items():
            if name != "no checks":
                print(f"\nchecks add {r - base:.1f} ms to a restart ({r / base:.1f}x)")
        samples = [spare_takeover(a.cxxrun, rdzv_server, scratch) for _ in range(a.runs)]
        print(f"\nfailed check at a restart -> the job's workers running with the spare: median "
              f"{statistics.median(samples):.0f} ms, min {min(samples):.0f}, max {max(samples):.0f} (n={len(samples)})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
