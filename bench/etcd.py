#!/usr/bin/python3
"""The etcd rendezvous (--rdzv-backend=etcd-v3) against c10d, side by side in one run.

A private three-member etcd cluster on loopback (tests/integration/etcd_cluster.py)
and a cxxrun-rdzv serve every case below; each case alternates the two backends.

  rdzv      N simulated agents (bench/rdzv_load: a thread each running our
            C10dRendezvous) meet through etcd and through cxxrun-rdzv, N = 100
            and 1,000, 8 workers each
  recover   the same agents after their first round: one failure, then
            every agent re-forms the job (rdzv_load --recover 1): the time to
            the last agent woken by the abort event and to the last holding its
            next-round assignment, N = 100 and 1,000 (or each --recover-nodes
            N); a process per 1,000 agents (rdzv_load --procs), as each agent
            holds about a dozen descriptors over etcd
  abort     3 agents x 2 workers, a worker on one node exits 1: the failure ->
            the last worker on the other nodes got SIGTERM (all stopped), and
            -> the last of 6 replacement workers exec'd (bench/elastic.py)
  dead      SIGKILL of one agent -> the first surviving worker got SIGTERM
            (c10d: keep-alive counters; etcd: the lease expires, a watch sees
            the DELETE)
  outage    3 agents x 2 workers that run for RUN_MS; 1 s after they start,
            etcd's leader is SIGKILLed (etcd) or cxxrun-rdzv is (c10d). The
            job's wall time against the same job undisturbed, its exit codes
            and whether any worker was started twice (a restart)

Usage: bench/etcd.py [--runs N] [--build build] [--only rdzv|recover|abort|dead|outage] [--recover-nodes N ...]
                    [--keep-alive S] [--spread] [--plot recovery-etcd.png] [--baseline BUILD]
       (after scripts/build.sh)
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import elastic  # noqa: E402
from etcd_cluster import EtcdCluster, unavailable  # noqa: E402

RUN_MS = 4000


def rdzv_load(build, args, timeout=120, key="seconds"):
    cmd = [os.path.join(build, "bench", "rdzv_load"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        print(f"rdzv_load {' '.join(args)} failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return result if key is None else result[key]


def knows_procs(build):
    """Whether this build's rdzv_load spreads its agents over processes
    (--procs): an earlier one does not."""
    r = subprocess.run([os.path.join(build, "bench", "rdzv_load")], capture_output=True, text=True)
    return "--procs" in r.stderr


def member_cpu(cluster):
    """Each etcd member's CPU seconds so far (user + system)."""
    out = []
    for m in cluster.members:
        try:
            with open(f"/proc/{m.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        except (OSError, AttributeError):
            out.append(0.0)
    return out


def compact(cluster):
    """Each run meets a cluster in the state an operator keeps it in: the
    history before now dropped (--auto-compaction-retention does that) and
    the backend defragmented. Without it, run after run, the history and
    the free pages of 1,000 agents' keys and leases slow the next run
    (measured: 8.6-12.5 s for 1,000 agents against 5.9-6.1 s)."""
    revisions = [s["header"]["revision"] for s in cluster.statuses().values()]
    if revisions:
        cluster.etcdctl("compaction", str(max(int(r) for r in revisions)))
    cluster.etcdctl("defrag", "--cluster")
    time.sleep(1)  # the last run's leases and watches are gone


def start_rdzv_server(build):
    port = elastic.free_port()
    p = subprocess.Popen([os.path.join(build, "bin", "cxxrun-rdzv"), "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            import socket
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("cxxrun-rdzv did not start")


def outage_run(build, stamp, rdzv, kill):
    """3 agents x 2 workers running RUN_MS; `kill()` 1 s after all started.
    Returns (wall s from the first agent's start to the last exit, exit codes,
    start files) or None with an error."""
    out = tempfile.mkdtemp(prefix="cxxrun_bench_")
    env = dict(os.environ, STAMP_RUN_MS=str(RUN_MS), TMPDIR=out)
    run_id = uuid.uuid4().hex[:10]
    procs = []
    try:
        t0 = time.monotonic()
        for _ in range(3):
            procs.append(elastic.launch(elastic.agent_cmd("cxxrun", build, 0, run_id, 3, stamp, out, rdzv=rdzv), env))
        deadline = time.monotonic() + 30
        while len(elastic.stamps(out, "start.")) < 6:
            if time.monotonic() > deadline:
                return None, "the job did not start"
            time.sleep(0.01)
        if kill:
            time.sleep(1.0)
            kill()
        for p in procs:
            p.wait(timeout=60)
        wall = time.monotonic() - t0
        codes = [p.returncode for p in procs]
        errs = [p.communicate()[1] for p in procs]
        return (wall, codes, len(elastic.stamps(out, "start."))), "" if codes == [0, 0, 0] else errs[0][-600:]
    except Exception as e:
        return None, repr(e)
    finally:
        elastic.stop_all(procs)
        shutil.rmtree(out, ignore_errors=True)


def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def draw_recovery(drawn, path, keep_alive):
    """Each backend's recovery against N, its two phases stacked: the abort
    event reaching every agent, then the re-join and assignment."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = sorted(drawn)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, name, title in ((axes[0], "c10d", "c10d (cxxrun-rdzv)"), (axes[1], "etcd", "etcd-v3 (3 members)")):
        labels = [f"{n:,}" for n in sizes]
        push = [(drawn[n][name][0] or 0.0) for n in sizes]
        total = [(drawn[n][name][1] or 0.0) for n in sizes]
        rejoin = [max(0.0, t - p) for t, p in zip(total, push)]
        ax.bar(labels, push, label="abort event reaches every agent")
        ax.bar(labels, rejoin, bottom=push, label="re-join and assignment")
        for x, n, t in zip(labels, sizes, total):
            failed = drawn[n][name][1] is None  # no run finished: say so, not 0 s
            ax.annotate("failed" if failed else f"{t:.2f} s", (x, t), ha="center", va="bottom", fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("simulated agents")
        ax.set_ylabel("seconds (median)")
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"One failure -> every agent holds its next assignment (leases renewed every {keep_alive:g} s)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", file=sys.stderr)


def fmt(values, unit="s", scale=1.0, digits=2):
    v = [x * scale for x in values if x is not None]
    if not v:
        return "FAILED"
    return f"median {statistics.median(v):.{digits}f} {unit} ({min(v):.{digits}f}–{max(v):.{digits}f}, n={len(v)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--only", action="append", choices=["rdzv", "recover", "abort", "dead", "outage"])
    ap.add_argument("--recover-nodes", type=int, action="append", help="agents of a recover case (100 and 1000)")
    ap.add_argument("--keep-alive", type=float, default=5.0,
                    help="recover: the agents' keep_alive_interval in seconds (5, torch's default; cxxrun's is 1). "
                         "N agents renew N/interval leases a second, and on two cores beside etcd 1,000 agents at "
                         "1 s overload it: leases lapse and every DELETE goes to every watch")
    ap.add_argument("--spread", action="store_true",
                    help="recover: agent i lists the etcd members from the (i mod 3)-th on (rdzv_load --spread 1), "
                         "so that 10,000 agents' connections fit three members' descriptor limits")
    ap.add_argument("--plot", help="recover: where to draw each backend's phases against N (PNG, python3-matplotlib)")
    ap.add_argument("--baseline", help="recover: also run etcd with this build's rdzv_load (an earlier commit's), "
                                       "alternating")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    only = set(args.only or ["rdzv", "recover", "abort", "dead", "outage"])
    why = unavailable()
    if why:
        sys.exit(why)
    scratch = tempfile.mkdtemp(prefix="cxxrun_bench_stamp_")
    stamp = os.path.join(scratch, "stamp")
    subprocess.run(["cc", "-O2", "-o", stamp, os.path.join(HERE, "stamp.c")], check=True)
    cluster = EtcdCluster(3)
    cluster.start()
    server, port = start_rdzv_server(build)
    etcd_flags = lambda: ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={cluster.endpoints()}"]  # noqa: E731
    c10d_flags = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
    rows = [f"etcd: 3 members, {shutil.which('etcd')}; the cluster answered a put {cluster.started_in:.2f} s after start"]
    try:
        if "rdzv" in only:
            for n in (100, 1000):
                t_c10d, t_etcd = [], []
                for _ in range(args.runs):
                    t_c10d.append(rdzv_load(build, ["--port", str(port), "--nodes", str(n)]))
                    compact(cluster)
                    t_etcd.append(rdzv_load(build, ["--etcd", cluster.endpoints(), "--nodes", str(n)]))
                print(f"[bench] rdzv {n}: c10d {t_c10d} etcd {t_etcd}", file=sys.stderr)
                rows.append(f"| rendezvous of {n:,} simulated agents | {fmt(t_c10d, digits=3)} | {fmt(t_etcd, digits=3)} |")
        if "recover" in only:
            # One failure -> every agent holds the next round's assignment,
            # the real C10dRendezvous in a thread per agent (rdzv_load
            # --recover 1); the abort push is the part until the last agent
            # was woken.
            rows.append(f"recover: the agents renew their leases every {args.keep_alive:g} s"
                        + ("; agent i asks member i mod 3 first" if args.spread else ""))
            drawn = {}  # n -> {backend: (median abort push, median recovery)}
            for n in args.recover_nodes or (100, 1000):
                got = {"c10d": ([], []), "etcd": ([], []), "baseline": ([], [])}
                cpu = {"etcd": ([], []), "baseline": ([], [])}  # the busiest member's CPU seconds, all members'
                scale = ["--procs", str(max(1, -(-n // 1000))), "--timeout", str(max(60, n // 10))]
                load = ["--keep-alive", str(args.keep_alive)] + (["--spread", "1"] if args.spread else [])
                kinds = [("c10d", build, ["--port", str(port)]), ("etcd", build, ["--etcd", cluster.endpoints()])]
                if args.baseline:
                    kinds.append(("baseline", os.path.abspath(args.baseline), ["--etcd", cluster.endpoints()]))
                for _ in range(args.runs):
                    for name, where, flags in kinds:
                        if name != "c10d":
                            compact(cluster)
                        extra = scale + load if name != "baseline" or knows_procs(where) else load
                        before = member_cpu(cluster)
                        r = rdzv_load(where, flags + ["--nodes", str(n), "--recover", "1"] + extra,
                                      timeout=max(240, n // 5), key=None)
                        spent = [b - a for a, b in zip(before, member_cpu(cluster))]
                        got[name][0].append(r["recovery_s"] if r else None)
                        got[name][1].append(r["abort_push_s"] if r else None)
                        if name != "c10d":
                            cpu[name][0].append(max(spent))
                            cpu[name][1].append(sum(spent))
                print(f"[bench] recover {n}: {got}", file=sys.stderr)
                drawn[n] = {name: (median(got[name][1]), median(got[name][0])) for name in ("c10d", "etcd")}
                print(f"[bench] recover {n}: etcd members' CPU seconds (busiest, all): {cpu}", file=sys.stderr)
                for label, c10d, etcd, baseline, digits in (
                        ("one failure -> every agent re-assigned", got["c10d"][0], got["etcd"][0], got["baseline"][0], 3),
                        ("of which the abort event reaching every agent", got["c10d"][1], got["etcd"][1],
                         got["baseline"][1], 3),
                        ("CPU seconds of the busiest etcd member, first round and recovery", None, cpu["etcd"][0],
                         cpu["baseline"][0], 1),
                        ("CPU seconds of all three etcd members", None, cpu["etcd"][1], cpu["baseline"][1], 1)):
                    row = f"| {n:,} agents: {label} | {fmt(c10d, digits=digits) if c10d else ''} | {fmt(etcd, digits=digits)}"
                    rows.append(row + (f" | {fmt(baseline, digits=digits)} |" if args.baseline else " |"))
            if args.plot:
                draw_recovery(drawn, args.plot, args.keep_alive)
        if "abort" in only:
            res = {"c10d": ([], []), "etcd": ([], [])}
            for _ in range(args.runs):
                for name, flags in (("c10d", None), ("etcd", etcd_flags())):
                    r, a, err = elastic.restart_run("cxxrun", build, stamp, rdzv=flags)
                    if err:
                        print(f"{name} abort run failed: {err}", file=sys.stderr)
                    res[name][0].append(r)
                    res[name][1].append(a)
            print(f"[bench] abort: {res}", file=sys.stderr)
            rows.append(f"| failure -> the last worker on the other nodes got SIGTERM | {fmt(res['c10d'][1], 'ms', digits=1)} | {fmt(res['etcd'][1], 'ms', digits=1)} |")
            rows.append(f"| failure -> the last of 6 replacements exec'd | {fmt(res['c10d'][0], 'ms', digits=1)} | {fmt(res['etcd'][0], 'ms', digits=1)} |")
        if "dead" in only:
            d = {"c10d": [], "etcd": []}
            for _ in range(args.runs):
                for name, flags in (("c10d", None), ("etcd", etcd_flags())):
                    v, err = elastic.dead_run(build, stamp, rdzv=flags)
                    if err:
                        print(f"{name} dead run failed: {err}", file=sys.stderr)
                    d[name].append(v)
            print(f"[bench] dead: {d}", file=sys.stderr)
            rows.append(f"| agent SIGKILL -> the first survivor's worker got SIGTERM | {fmt(d['c10d'], 'ms', digits=0)} | {fmt(d['etcd'], 'ms', digits=0)} |")
        if "outage" in only:
            outage_rows(build, stamp, cluster, etcd_flags, rows, args.runs)
    finally:
        server.kill()
        server.wait()
        cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print("| case | c10d (cxxrun-rdzv) | etcd-v3 (3 members) |")
    print("|---|---|---|")
    for r in rows:
        print(r)


def outage_rows(build, stamp, cluster, etcd_flags, rows, runs):
    calm, hit, lost = [], [], []
    starts, codes = [], []
    for _ in range(runs):
        r, err = outage_run(build, stamp, etcd_flags(), None)
        calm.append(r and r[0])
        if err:
            print(f"undisturbed etcd job: {err}", file=sys.stderr)
        leader = cluster.leader()
        r, err = outage_run(build, stamp, etcd_flags(), lambda: cluster.kill(leader))
        hit.append(r and r[0])
        if r:
            starts.append(r[2])
            codes.append(r[1])
        if err:
            print(f"etcd job, leader {leader} killed: {err}", file=sys.stderr)
        cluster.restart_member(leader)
        cluster.wait_healthy()
        # The same blow to c10d: its store's only process.
        server, port = start_rdzv_server(build)
        flags = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
        r, err = outage_run(build, stamp, flags, lambda: (server.send_signal(signal.SIGKILL), server.wait()))
        lost.append(r)
        server.kill()
        server.wait()
    print(f"[bench] outage: calm {calm} hit {hit} starts {starts} codes {codes} c10d {lost}", file=sys.stderr)
    extra = [h - c for h, c in zip(hit, calm) if h is not None and c is not None]
    rows.append(f"| job of {RUN_MS / 1000:.0f} s, undisturbed: wall time | | {fmt(calm)} |")
    rows.append(f"| the same, store's leader/only process SIGKILLed 1 s in: wall time | see below | {fmt(hit)} |")
    rows.append(f"| downtime (killed − undisturbed, run by run) | | {fmt(extra)} |")
    rows.append(f"| workers started (6 = no restart); exit codes | | {starts}; {codes} |")
    c10d = [f"{r[0]:.1f} s, exit {r[1]}" if r else "FAILED" for r in lost]
    rows.append(f"| c10d with cxxrun-rdzv SIGKILLed 1 s in: the job ends after | {'; '.join(c10d)} | |")


if __name__ == "__main__":
    main()
