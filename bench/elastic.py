#!/usr/bin/python3
"""Multi-node benchmarks of the elastic agent, 3 agents x 2 workers on loopback.

  restart  first failure (a worker on the middle node exits 1) -> the last of
           the 6 replacement workers exec'd, --max-restarts=1
  abort    first failure -> the last worker on the *other* nodes got SIGTERM
  dead     SIGKILL of one agent -> the first surviving worker got SIGTERM
           (dead-node detection + abort push), default keep-alives (1 s x 3)

torchrun (Debian torch 1.13 through bench/torchrun113.py, --monitor_interval=0.1)
runs the restart/abort case side by side; its dead-node case is not measured:
torch 1.13 does not act on a dead node until the survivors' own workers fail.

Usage: bench/elastic.py [--runs N] [--build build] [--skip-torchrun]
       bench/elastic.py --policies [--runs N]   the restart with and without the restart verdict
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_ns(path):
    with open(path) as f:
        return int(f.read().strip())


def stamps(out, prefix):
    """Stamp files by name; one being written right now is skipped."""
    found = {}
    for n in os.listdir(out):
        if n.startswith(prefix):
            try:
                found[n] = read_ns(os.path.join(out, n))
            except (OSError, ValueError):
                pass
    return found


def launch(cmd, env):
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.communicate(timeout=30)


def agent_cmd(kind, build, port, run_id, nnodes, stamp, out, extra=(), rdzv=None):
    """`rdzv`: cxxrun's rendezvous flags instead of c10d at 127.0.0.1:port."""
    if kind == "cxxrun":
        rdzv = rdzv or ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
        return [os.path.join(build, "bin", "cxxrun"), *rdzv,
                f"--rdzv-id={run_id}", f"--nnodes={nnodes}", "--nproc-per-node=2", *extra, "--no-python",
                stamp, "cluster", out]
    return ["/usr/bin/python3", os.path.join(HERE, "torchrun113.py"), "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}", f"--nnodes={nnodes}", "--nproc_per_node=2",
            "--monitor_interval=0.1", *extra, "--no_python", stamp, "cluster", out]


def restart_run(kind, build, stamp, timeout=120, rdzv=None, extra=()):
    out = tempfile.mkdtemp(prefix="cxxrun_bench_")
    env = dict(os.environ, STAMP_FAIL_RANK="3", TMPDIR=out)
    port, run_id = free_port(), uuid.uuid4().hex[:10]
    max_restarts = "--max-restarts=1" if kind == "cxxrun" else "--max_restarts=1"
    procs = []
    try:
        for i in range(3):
            procs.append(launch(agent_cmd(kind, build, port, run_id, 3, stamp, out, [max_restarts, *extra], rdzv), env))
            if i == 0 and not rdzv:
                time.sleep(0.3)  # the first agent hosts the store
        # Replacements are the workers started after the failure: torchrun
        # restarts the other nodes as a membership change, so their restart
        # count stays 0 and they cannot be told apart by attempt.
        deadline = time.monotonic() + timeout
        while True:
            fail = stamps(out, "fail.0").get("fail.0")
            if fail:
                starts = {n: t for n, t in stamps(out, "start.").items() if t > fail}
                if len({n.split(".")[3] for n in starts}) >= 6:
                    break
            if time.monotonic() > deadline:
                return None, None, "6 replacements did not start"
            if all(p.poll() is not None for p in procs):
                return None, None, "every agent exited: " + procs[0].communicate()[1][-2000:]
            time.sleep(0.005)
        terms = stamps(out, "term.")
        # Ranks 2 and 3 are on the failing node (2 workers each, rank 3 failed).
        other = [t for n, t in terms.items() if int(n.split(".")[1]) not in (2, 3)]
        latest = {}
        for n, t in starts.items():
            rank = n.split(".")[3]
            latest[rank] = min(t, latest.get(rank, t))
        return (max(latest.values()) - fail) / 1e6, (max(other) - fail) / 1e6 if other else None, ""
    except Exception as e:  # a launcher that fails is reported, not hidden
        return None, None, repr(e)
    finally:
        stop_all(procs)
        shutil.rmtree(out, ignore_errors=True)


def dead_run(build, stamp, timeout=60, rdzv=None):
    out = tempfile.mkdtemp(prefix="cxxrun_bench_")
    env = dict(os.environ, STAMP_DONE_WORLD="2", TMPDIR=out)
    port, run_id = free_port(), uuid.uuid4().hex[:10]
    procs = []
    try:
        for i in range(3):
            procs.append(launch(agent_cmd("cxxrun", build, port, run_id, "2:3", stamp, out, rdzv=rdzv), env))
            if i == 0 and not rdzv:
                time.sleep(0.3)
        deadline = time.monotonic() + 30
        while len(stamps(out, "start.0.3.")) < 6:
            if time.monotonic() > deadline:
                return None, "the 3-node job did not start"
            time.sleep(0.01)
        time.sleep(1.5)  # a few keep-alives go through
        killed_at = time.time_ns()
        os.killpg(procs[2].pid, signal.SIGKILL)
        end = time.monotonic() + timeout
        for p in procs[:2]:
            p.wait(timeout=max(1, end - time.monotonic()))
        terms = stamps(out, "term.")
        victim_ranks = {int(n.split(".")[3]) for n in stamps(out, "start.0.3.")} - {
            int(n.split(".")[3]) for n in stamps(out, "start.0.2.")}
        survivors = [t for n, t in terms.items() if t > killed_at]
        if not survivors or not stamps(out, "start.0.2."):
            return None, f"survivors did not re-form the job (terms {len(terms)}, ranks {sorted(victim_ranks)})"
        return (min(survivors) - killed_at) / 1e6, ""
    except Exception as e:
        return None, repr(e)
    finally:
        stop_all(procs)
        shutil.rmtree(out, ignore_errors=True)


def summary(values):
    v = [x for x in values if x is not None]
    if not v:
        return "FAILED"
    return f"median {statistics.median(v):.1f} ms, min {min(v):.1f}, max {max(v):.1f} (n={len(v)})"


def compare_policies(args, stamp, scratch):
    """What the restart verdict costs a restart: the nodes share their
    attempt records and settle one verdict through the store before they
    re-join (agent/verdict/job_history.h); 'always' skips it."""
    times = {"always": [], "progress": []}
    for _ in range(args.runs):
        for policy in times:
            r, _, err = restart_run("cxxrun", args.build, stamp, extra=[f"--restart-policy={policy}"])
            if err:
                print(f"{policy} restart run failed: {err}", file=sys.stderr)
            times[policy].append(r)
    print("| restart: first failure -> 6 replacements exec'd | --restart-policy=always | progress (default) |")
    print("|---|---|---|")
    print(f"| 3 agents x 2 workers, c10d on loopback | {summary(times['always'])} | {summary(times['progress'])} |")
    shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--skip-torchrun", action="store_true")
    ap.add_argument("--policies", action="store_true",
                    help="only the restart, under --restart-policy=always and the default (the verdict), alternating")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="cxxrun_bench_stamp_")
    stamp = os.path.join(scratch, "stamp")
    subprocess.run(["cc", "-O2", "-o", stamp, os.path.join(HERE, "stamp.c")], check=True)
    if args.policies:
        return compare_policies(args, stamp, scratch)
    kinds = ["cxxrun"] + ([] if args.skip_torchrun else ["torchrun"])
    results = {}
    for kind in kinds:
        restarts, aborts = [], []
        for _ in range(args.runs):
            r, a, err = restart_run(kind, args.build, stamp)
            if err:
                print(f"{kind} restart run failed: {err}", file=sys.stderr)
            restarts.append(r)
            aborts.append(a)
        results[kind] = (restarts, aborts)
    deads = []
    for _ in range(args.runs):
        d, err = dead_run(args.build, stamp)
        if err:
            print(f"dead-node run failed: {err}", file=sys.stderr)
        deads.append(d)
    print("| benchmark | cxxrun | torchrun 1.13 | target |")
    print("|---|---|---|---|")
    tr = results.get("torchrun", ([None], [None]))
    print(f"| restart: first failure -> 6 replacements exec'd | {summary(results['cxxrun'][0])} | "
          f"{summary(tr[0])} | <= 100 ms |")
    print(f"| abort push: first failure -> last worker on other nodes got SIGTERM | {summary(results['cxxrun'][1])} | "
          f"{summary(tr[1])} | <= 1 s |")
    print(f"| dead node: agent SIGKILL -> first survivor worker got SIGTERM | {summary(deads)} | not detected | <= 3 s |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
