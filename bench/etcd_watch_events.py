#!/usr/bin/env python3
"""Watch events etcd sends to a job of real agents over the etcd rendezvous:
N `cxxrun` agents on loopback (one worker each) join a private 3-member etcd
(tests/integration/etcd_cluster.py); the workers of the first attempt fail,
the job re-forms once and succeeds. What every watch stream of the job
received is counted by etcd itself (etcd_debugging_mvcc_events_total summed
over the members, the run less the cluster's count before it), per agent.
The load generators (etcd_sim, rdzv_load) model one connection per agent
for the milestones; a real agent keeps a second one, its round watcher's,
for the job's life, and this counts what it receives too.

    /usr/bin/python3 bench/etcd_watch_events.py [--nodes N] [--runs R] [--build DIR] [--baseline DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from etcd_cluster import EtcdCluster  # noqa: E402

# The first attempt's workers fail; the second's succeed.
WORKER = 'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then sleep 1; exit 1; fi; sleep 1'


def run_job(cxxrun, cluster, nodes):
    run_id = uuid.uuid4().hex[:12]
    argv = [cxxrun, f"--nnodes={nodes}", "--nproc-per-node=1", "--rdzv-backend=etcd-v3",
            f"--rdzv-endpoint={cluster.endpoints()}", f"--rdzv-id={run_id}", "--max-restarts=1",
            "--no-python", "sh", "-c", WORKER]
    agents = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
              for _ in range(nodes)]
    failed = []
    for a in agents:
        try:
            _, err = a.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            a.kill()
            _, err = a.communicate()
        if a.returncode != 0:
            failed.append(err[-2000:])
    if failed:
        raise RuntimeError(f"{len(failed)} of {nodes} agents failed; the first said:\n{failed[0]}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=8, help="agents of the job")
    ap.add_argument("--runs", type=int, default=3, help="jobs of each build, alternating")
    ap.add_argument("--build", default=os.path.join(here, "..", "build"), help="the build whose cxxrun runs")
    ap.add_argument("--baseline", help="another build whose cxxrun runs alternately")
    args = ap.parse_args()
    for name in ("nodes", "runs"):
        if getattr(args, name) < 1:
            print(f"etcd_watch_events: --{name} {getattr(args, name)}: must be at least 1", file=sys.stderr)
            sys.exit(2)
    builds = [("this build", args.build)] + ([("baseline", args.baseline)] if args.baseline else [])
    for label, build in builds:
        if not os.access(os.path.join(build, "bin", "cxxrun"), os.X_OK):
            print(f"etcd_watch_events: {label} {build}: no bin/cxxrun (build it first)", file=sys.stderr)
            sys.exit(2)
    cluster = EtcdCluster(3)
    cluster.start()
    results = {label: [] for label, _ in builds}
    try:
        for _ in range(args.runs):
            for label, build in builds:
                before = cluster.metric_total("etcd_debugging_mvcc_events_total")
                run_job(os.path.join(build, "bin", "cxxrun"), cluster, args.nodes)
                results[label].append((cluster.metric_total("etcd_debugging_mvcc_events_total") - before) / args.nodes)
    finally:
        cluster.stop()
    print(f"| {args.nodes} agents, one failure and one re-form (median of {args.runs}) | watch events sent per agent |")
    print("|---|---:|")
    for label, samples in results.items():
        print(f"| {label} | {statistics.median(samples):.1f} ({min(samples):.1f}-{max(samples):.1f}) |")


if __name__ == "__main__":
    main()
