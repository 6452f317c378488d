#!/usr/bin/python3
"""What one recovery over etcd asks of etcd, per re-joining agent, counted by etcd itself.

A private three-member etcd (tests/integration/etcd_cluster.py) serves N simulated agents
(bench/rdzv_load, the real C10dRendezvous over EtcdJobStore, a thread each): once for the
first round alone and once for the first round and one recovery (--recover 1). Each
member's gRPC counters (`grpc_server_started_total` by method) are read before and after each run; the recovery's requests are
the second run's less the first's. With --baseline, an earlier build's rdzv_load runs
the same, alternating, for a side-by-side table.

Usage: bench/etcd_requests.py [--nodes 200] [--runs 2] [--build build] [--baseline DIR]
       (DIR holds bench/rdzv_load of the other build)
"""
import argparse
import collections
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
from etcd import compact  # noqa: E402
from etcd_cluster import EtcdCluster, unavailable  # noqa: E402

# The requests, by gRPC method.
METHODS = {"Range": "ranges", "Put": "puts", "Txn": "transactions", "Watch": "watch streams",
           "LeaseGrant": "lease grants", "LeaseKeepAlive": "keep-alive streams", "LeaseRevoke": "revokes",
           "DeleteRange": "deletes"}


def started(cluster):
    """Requests started so far, by method, summed over the members."""
    total = collections.Counter()
    for m in cluster.members:
        body = urllib.request.urlopen(f"http://{m.endpoint}/metrics", timeout=5).read().decode()
        for line in body.splitlines():
            if line.startswith("grpc_server_started_total{"):
                method = line.split('grpc_method="', 1)[1].split('"', 1)[0]
                total[method] += int(float(line.rsplit(" ", 1)[1]))
    return total


def run(cluster, rdzv_load, nodes, recover):
    compact(cluster)
    before = started(cluster)
    argv = [rdzv_load, "--etcd", cluster.endpoints(), "--nodes", str(nodes), "--keep-alive", "5",
            "--timeout", "120", "--recover", "1" if recover else "0"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {r.stderr.strip()[-500:]}")
    return started(cluster) - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--baseline", help="a directory holding bench/rdzv_load of another build")
    args = ap.parse_args()
    why = unavailable()
    if why:
        sys.exit(why)
    builds = [("this build", os.path.join(os.path.abspath(args.build), "bench", "rdzv_load"))]
    if args.baseline:
        builds.append(("baseline", os.path.join(os.path.abspath(args.baseline), "bench", "rdzv_load")))
    per_agent = {name: collections.defaultdict(list) for name, _ in builds}
    cluster = EtcdCluster(3)
    cluster.start()
    try:
        for _ in range(args.runs):
            for name, binary in builds:
                first = run(cluster, binary, args.nodes, False)
                both = run(cluster, binary, args.nodes, True)
                for method in METHODS:
                    per_agent[name][method].append((both[method] - first[method]) / args.nodes)
                print(f"[bench] {name}: {dict((m, both[m] - first[m]) for m in METHODS)}", file=sys.stderr)
    finally:
        cluster.stop()
    head = "| request, per re-joining agent (mean of runs) | " + " | ".join(n for n, _ in builds) + " |"
    print(head)
    print("|---|" + "---:|" * len(builds))
    for method, words in METHODS.items():
        cells = [f"{sum(v) / len(v):.2f}" for v in (per_agent[n][method] for n, _ in builds)]
        print(f"| {words} ({method}) | " + " | ".join(cells) + " |")
    totals = [sum(sum(per_agent[n][m]) / args.runs for m in METHODS) for n, _ in builds]
    print("| **in all** | " + " | ".join(f"**{t:.2f}**" for t in totals) + " |")


if __name__ == "__main__":
    main()
