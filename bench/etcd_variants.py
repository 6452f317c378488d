#!/usr/bin/python3
"""etcd_sim's recovery with and without a generator option, side by side.

Each run starts a fresh private three-member etcd on loopback
(tests/integration/etcd_cluster.py), runs one etcd_sim job of N agents with
one failure and one re-form (--recover 1, leases renewed every --keep-alive
seconds, agent i asking member i mod 3 first), and stops the cluster; the
variants alternate run by run, so that the machine's drift falls on all of
them. bench/etcd.py reuses one cluster across its runs, which it compacts
between them; a fresh one per run takes that out of the comparison.

A variant is LABEL=OPTIONS: etcd_sim options added to every run of it
("base=" for none; "m=--master-in-assignment 1"), or LABEL@BUILD=OPTIONS:
that build's etcd_sim (an earlier commit's: "before@/tmp/base/build=").

Usage: bench/etcd_variants.py [--nodes 10000] [--runs 3] [--build build] [--keep-alive 30]
                              [--etcd-bin DIR] LABEL[@BUILD]=OPTIONS ...
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from etcd_cluster import EtcdCluster  # noqa: E402

SHOWN = (("one failure -> every agent re-assigned", "recovery_s", "s"),
         ("abort event reaching every agent", "abort_push_s", "s"),
         ("re-join (round 1 complete for all)", "rejoin_s", "s"),
         ("assignment and master", "assign_s", "s"),
         ("first round", "seconds", "s"),
         ("requests refused and sent again, both rounds", "retries", ""),
         ("CPU seconds of the three members, the whole job", "members_cpu", ""))


def variant(text):
    name, eq, options = text.partition("=")
    label, at, build = name.partition("@")
    if not eq or not label or (at and not build):
        raise argparse.ArgumentTypeError(f"variant '{text}': LABEL[@BUILD]=OPTIONS, e.g. base= or "
                                         "m=--master-in-assignment 1 or before@/tmp/base/build=")
    if build and not os.access(os.path.join(build, "bench", "etcd_sim"), os.X_OK):
        raise argparse.ArgumentTypeError(f"variant '{text}': no bench/etcd_sim in {build}")
    return label, (build or None, shlex.split(options))


def one_run(build, nodes, keep_alive, options):
    cluster = EtcdCluster(3).start()
    try:
        before = sum(cluster.cpu_seconds())
        procs = max(1, -(-nodes * 4 // 18000))
        argv = [os.path.join(build, "bench", "etcd_sim"), "--etcd", cluster.endpoints(), "--nodes", str(nodes),
                "--procs", str(procs), "--timeout", str(max(60, nodes // 10)), "--keep-alive", str(keep_alive),
                "--spread", "1", "--recover", "1"] + options
        r = subprocess.run(argv, capture_output=True, text=True, timeout=max(240, nodes // 5))
        if r.returncode != 0:
            print(f"{' '.join(argv)} failed: {(r.stderr.strip() or r.stdout.strip())[-500:]}", file=sys.stderr)
            return None
        out = json.loads(r.stdout.strip().splitlines()[-1])
        out["members_cpu"] = round(sum(cluster.cpu_seconds()) - before, 1)
        return out
    finally:
        cluster.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--keep-alive", type=float, default=30.0)
    ap.add_argument("--etcd-bin", help="the directory of the etcd server to run (default: etcd on PATH)")
    ap.add_argument("variants", nargs="+", type=variant, metavar="LABEL=OPTIONS")
    args = ap.parse_args()
    if args.nodes <= 0 or args.runs <= 0 or args.keep_alive <= 0:
        ap.error("--nodes, --runs and --keep-alive must be positive")
    if args.etcd_bin:
        os.environ["PATH"] = os.path.abspath(args.etcd_bin) + os.pathsep + os.environ["PATH"]
    got = {label: [] for label, _ in args.variants}
    for run in range(args.runs):
        for label, (build, options) in args.variants:
            r = one_run(build or args.build, args.nodes, args.keep_alive, options)
            got[label].append(r)
            print(f"[variants] {label} run {run}: {json.dumps(r)}", file=sys.stderr, flush=True)
    print(f"| {args.nodes:,} agents, median of {args.runs} (range) | " + " | ".join(got) + " |")
    print("|---|" + "---:|" * len(got))
    for title, key, unit in SHOWN:
        cells = []
        for label in got:
            values = sorted(r[key] for r in got[label] if r and key in r)
            if not values:
                cells.append("")
                continue
            mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
            fmt = (lambda v: f"{v:.2f}") if unit else (lambda v: f"{v:,.0f}" if key == "retries" else f"{v:.1f}")
            cells.append(f"{fmt(mid)}{' ' + unit if unit else ''} ({fmt(values[0])}-{fmt(values[-1])})")
        print(f"| {title} | " + " | ".join(cells) + " |")
    failed = sum(1 for rs in got.values() for r in rs if r is None)
    if failed:
        print(f"{failed} run(s) failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
