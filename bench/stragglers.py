"""Stragglers (issue 43, docs/stragglers.md): how long cxxrun takes to name a
slowed rank or node, and how often it names one in a healthy job, over
repeated runs, for each signal alone and together. Prints one markdown
table row per case.

  python3 bench/stragglers.py [--runs N] [--healthy-runs N] [--healthy-seconds S] [--cases a,b]

Cases (a 4-rank CPU torch job, tests/integration/torch_jobs/lockstep.py):
  compute   synchronous steps, rank 3 put under a 20 % CPU quota: only the
            compute signal can see it (no progress source, no GPU)
  step      the same ranks stepping at their own rates (no collective), with
            --progress-pattern: only the step signal can see it
  gpu       idle ranks, the fake NVML's GPU 1 turned to 990 of 1980 MHz with a
            thermal reason: only the GPU signal can see it
  together  synchronous steps with --progress-pattern and the fake NVML (GPUs
            normal), rank 3 under the quota: every signal on at once
  node      two c10d nodes of 2 ranks, node rank 1's ranks under one quota
  healthy   synchronous steps with --progress-pattern beside a busy loop, no
            slowdown: any line is a false report
Time to name: from the slowdown to the line. Needs root, the v1 cpu
hierarchy, torch, and the build's cxxrun, cxxrun-rdzv and fake NVML."""
import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build")
os.environ.setdefault("CXXRUN", os.path.join(BUILD, "bin", "cxxrun"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from harness import RDZV_SERVER, clean_env, end, free_port, start  # noqa: E402
from stragglers import LOCKSTEP, CpuQuota, Output, lockstep_env, read_pid  # noqa: E402

FAKE_NVML = os.path.join(BUILD, "tests", "fake_nvml", "libnvidia-ml.so.1")
LIMIT = 60  # a slowdown not named by then counts as missed
PATTERN = r"--progress-pattern=step (\d+)"


def wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def write_state(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


class Run:
    """One job: its agents, its pid directory, the straggler lines they said."""

    def __init__(self, work):
        self.dir = os.path.join(work, uuid.uuid4().hex[:8])
        os.mkdir(self.dir)
        self.agents = []
        self.cleanups = []

    def agent(self, args, env):
        p = start(args, env=env)
        self.agents.append(Output(p))
        return self.agents[-1]

    def ranks_up(self, world=4):
        return wait(lambda: all(read_pid(self.dir, r) for r in range(world)), 120)

    def first(self, text):
        found = [a.first(text) for a in self.agents]
        found = [f for f in found if f]
        return min(found) if found else None

    def lines(self):
        return [line for a in self.agents for line in a.text().splitlines() if "straggler:" in line]

    def finish(self):
        open(os.path.join(self.dir, "stop"), "w").close()
        for a in self.agents:
            try:
                a.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pass
            end(a.proc)
        for c in reversed(self.cleanups):
            c()


def throttled_run(work, case):
    """Seconds from the slowdown to the line, or None; and the lines said of
    any other rank or node."""
    r = Run(work)
    try:
        env_extra = {}
        args = ["--standalone", "--nproc-per-node=4"]
        if case == "step":
            env_extra["SYNC"] = "0"
        if case in ("step", "together"):
            args.append(PATTERN)
        if case == "together":
            state = os.path.join(r.dir, "nvml")
            write_state(state, "count=4\n")
            env_extra.update(CXXRUN_NVML_LIBRARY=FAKE_NVML, FAKE_NVML_STATE=state)
        if case == "node":
            port = free_port()
            server = subprocess.Popen([RDZV_SERVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            r.cleanups.append(lambda: (server.kill(), server.wait(timeout=10)))
            time.sleep(0.3)
            args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={uuid.uuid4().hex[:8]}",
                    "--nnodes=2", "--nproc-per-node=2"]
            for _ in range(2):
                r.agent(args + [LOCKSTEP], lockstep_env(r.dir))
        else:
            r.agent(args + [LOCKSTEP], lockstep_env(r.dir, **env_extra))
        if not r.ranks_up():
            return None, "", ["the job did not start"]
        time.sleep(7)
        quota = CpuQuota(0.2)
        r.cleanups.append(quota.remove)
        slow = [2, 3] if case == "node" else [3]
        for rank in slow:
            quota.add(read_pid(r.dir, rank))
        t0 = time.monotonic()
        wanted = "straggler: node " if case == "node" else "straggler: rank 3 on"
        named = wait(lambda: r.first(wanted), LIMIT)
        took = r.first(wanted)[0] - t0 if named else None
        others = [line for line in r.lines() if wanted not in line and "no longer" not in line]
        return took, (r.first(wanted)[1] if named else ""), others
    finally:
        r.finish()


def gpu_run(work):
    r = Run(work)
    try:
        state = os.path.join(r.dir, "nvml")
        write_state(state, "count=2\n")
        a = r.agent(["--standalone", "--nproc-per-node=2", "--no-python", "sh", "-c",
                     f"echo $$ > {r.dir}/pid.$RANK; while [ ! -e {r.dir}/stop ]; do sleep 0.2; done"],
                    clean_env(CXXRUN_NVML_LIBRARY=FAKE_NVML, FAKE_NVML_STATE=state))
        if not r.ranks_up(2):
            return None, "", ["the job did not start"]
        time.sleep(7)
        write_state(state, "count=2\n1.sm_clock=990\n1.max_sm_clock=1980\n1.clock_reasons=0x40\n")
        t0 = time.monotonic()
        named = wait(lambda: a.first("straggler: rank 1 on"), LIMIT)
        took = a.first("straggler: rank 1 on")[0] - t0 if named else None
        return took, (a.first("straggler: rank 1 on")[1] if named else ""), [
            line for line in r.lines() if "rank 1 on" not in line]
    finally:
        r.finish()


def healthy_run(work, seconds):
    r = Run(work)
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    r.cleanups.append(lambda: (busy.kill(), busy.wait(timeout=10)))
    try:
        a = r.agent(["--standalone", "--nproc-per-node=4", PATTERN, LOCKSTEP],
                    lockstep_env(r.dir, MAX_SECONDS=str(seconds)))
        a.proc.wait(timeout=seconds + 180)
        a.join(10)
        return r.lines()
    finally:
        r.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--healthy-runs", type=int, default=10)
    ap.add_argument("--healthy-seconds", type=int, default=60)
    ap.add_argument("--cases", default="compute,step,gpu,together,node,healthy")
    ap.add_argument("--work", default="/tmp/cxxrun-bench-stragglers")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print("| case | runs | named within 30 s | time to name: median, max (s) | named by | other lines (false reports) |")
    print("|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        if case == "healthy":
            reports = [healthy_run(args.work, args.healthy_seconds) for _ in range(args.healthy_runs)]
            false = sum(1 for lines in reports if lines)
            print(f"| healthy, {args.healthy_seconds} s beside a busy loop | {args.healthy_runs} | - | - | - | "
                  f"{false} runs with a line{': ' + reports[[bool(x) for x in reports].index(True)][0] if false else ''} |",
                  flush=True)
            continue
        times, others, signals = [], [], set()
        for _ in range(args.runs):
            took, line, wrong = gpu_run(args.work) if case == "gpu" else throttled_run(args.work, case)
            times.append(took)
            others.extend(wrong)
            for words, signal in (("computes", "compute"), ("step time", "step"), ("runs its GPU", "gpu-clock")):
                if words in line:
                    signals.add(signal)
        named = [t for t in times if t is not None]
        within = sum(1 for t in named if t <= 30)
        spread = f"{statistics.median(named):.1f}, {max(named):.1f}" if named else "-"
        print(f"| {case} | {args.runs} | {within} of {args.runs} | {spread} | {', '.join(sorted(signals))} | {len(others)}"
              f"{': ' + others[0].strip()[:160] if others else ''} |", flush=True)


if __name__ == "__main__":
    main()
