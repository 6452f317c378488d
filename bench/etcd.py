#!/usr/bin/python3
"""The etcd rendezvous (--rdzv-backend=etcd-v3) against c10d, side by side in one run.

A private three-member etcd cluster on loopback (tests/integration/etcd_cluster.py)
and a cxxrun-rdzv serve every case below; each case alternates the two backends.

  rdzv      N simulated agents (bench/rdzv_load: a thread each running our
            C10dRendezvous) meet through etcd and through cxxrun-rdzv, N = 100
            and 1,000, 8 workers each
  recover   the same agents after their first round: one failure, then
            every agent re-forms the job: the time to the last agent woken by
            the abort event and to the last holding its next-round assignment,
            N = 100 and 1,000 (or each --recover-nodes N). --generator sim (the
            default): event-driven agents, one thread a process, etcd_sim over
            etcd and rdzv_sim over cxxrun-rdzv, with the re-join and assignment
            apart; --generator threads: rdzv_load --recover 1, a thread per
            agent running the real code (a process per 1,000 agents)
  validate  the same 100 agents (--validate-nodes) through rdzv_load and
            through etcd_sim, each against a fresh cluster: the requests every
            member started per gRPC method, per agent, side by side
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

Usage: bench/etcd.py [--runs N] [--build build] [--only rdzv|recover|abort|dead|outage|validate]
                    [--recover-nodes N ...] [--generator sim|threads] [--keep-alive S] [--no-spread]
                    [--plot recovery-etcd.png] [--baseline BUILD] [--validate-nodes N] [--etcd-bin DIR]
                    [--nice N]
       (after scripts/build.sh)
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import elastic  # noqa: E402
from etcd_cluster import EtcdCluster, unavailable  # noqa: E402
from etcd_plot import draw_recovery, median, medians_to_draw, recover_logs  # noqa: E402

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
    return cluster.cpu_seconds()


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


def etcd_version():
    """"etcd 3.5.16": the version of the etcd on PATH."""
    out = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout
    return "etcd " + out.split("\n")[0].split(":")[-1].strip() if out else "etcd"


def fmt(values, unit="s", scale=1.0, digits=2):
    v = [x * scale for x in values if x is not None]
    if not v:
        return "FAILED"
    return f"median {statistics.median(v):.{digits}f} {unit} ({min(v):.{digits}f}–{max(v):.{digits}f}, n={len(v)})"


def replot(args):
    if not args.plot:
        sys.exit("--replot draws --plot: name the PNG")
    drawn = {n: medians_to_draw(runs) for n, runs in recover_logs(args.replot).items()}
    if args.etcd_bin:
        os.environ["PATH"] = os.path.abspath(args.etcd_bin) + os.pathsep + os.environ["PATH"]
    draw_recovery(drawn, args.plot, args.keep_alive, etcd_version())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--only", action="append", choices=["rdzv", "recover", "abort", "dead", "outage", "validate"])
    ap.add_argument("--recover-nodes", type=int, action="append", help="agents of a recover case (100 and 1000)")
    ap.add_argument("--keep-alive", type=float, default=5.0,
                    help="recover: the agents' keep_alive_interval in seconds (5, torch's default; cxxrun's is 1). "
                         "N agents renew N/interval leases a second, and on two cores beside etcd 1,000 agents at "
                         "1 s overload it: leases lapse and every DELETE goes to every watch")
    ap.add_argument("--no-spread", dest="spread", action="store_false",
                    help="recover: every agent asks the first listed etcd member first, as cxxrun did before each "
                         "process started at a member of its own (rendezvous/etcd_store.h, etcd_options); by "
                         "default agent i lists the members from the (i mod 3)-th on (rdzv_load and etcd_sim "
                         "--spread 1), as the product's nodes spread")
    ap.add_argument("--plot", help="recover: where to draw each backend's phases against N (PNG, python3-matplotlib)")
    ap.add_argument("--baseline", help="recover: also run etcd with this build's generators (an earlier commit's: "
                    "its etcd_sim with the sim generator, its rdzv_load with threads), alternating")
    ap.add_argument("--generator", action="append", choices=["sim", "threads"],
                    help="recover: the load generator (repeat for both): sim (etcd_sim and rdzv_sim, event-driven, the "
                         "default) or threads (rdzv_load, the real code in a thread per agent)")
    ap.add_argument("--validate-nodes", type=int, default=100, help="validate: the agents of each generator's job")
    ap.add_argument("--etcd-bin", help="the directory of the etcd server to run (default: etcd on PATH, Debian 12's "
                    "3.4); bench/fetch-etcd.sh unpacks Debian 13's 3.5 for this")
    ap.add_argument("--nice", type=int, default=0,
                    help="recover, validate: run the generators at this niceness (10: the etcd members and "
                         "cxxrun-rdzv come first, as on a cluster where they have machines of their own; beside "
                         "10,000 simulated agents on two cores, members starved of CPU miss their heartbeats and "
                         "elect a leader again and again)")
    ap.add_argument("--replot", nargs="+", metavar="LOG",
                    help="draw --plot from the stderr of earlier recover runs (their '[bench] recover N: ...' "
                         "lines, the last per N), and run nothing: one picture of sizes measured apart")
    args = ap.parse_args()
    if args.replot:
        return replot(args)
    global GENERATOR_NICE
    GENERATOR_NICE = args.nice
    build = os.path.abspath(args.build)
    if args.etcd_bin:
        if not os.access(os.path.join(args.etcd_bin, "etcd"), os.X_OK):
            sys.exit(f"--etcd-bin {args.etcd_bin}: no etcd there (bench/fetch-etcd.sh unpacks one)")
        os.environ["PATH"] = os.path.abspath(args.etcd_bin) + os.pathsep + os.environ["PATH"]
    only = set(args.only or ["rdzv", "recover", "abort", "dead", "outage", "validate"])
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
    rows = [f"etcd: 3 members, {shutil.which('etcd')} ({etcd_version()}); the cluster answered a put {cluster.started_in:.2f} s after start"]
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
            recover_rows(build, args, cluster, port, rows)
        if "validate" in only:
            validate_rows(build, args, rows)
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


GENERATOR_NICE = 0  # --nice


def run_json(cmd, timeout):
    """The last line of a generator's output, as JSON; None if it failed."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=(lambda: os.nice(GENERATOR_NICE)) if GENERATOR_NICE else None)
    if r.returncode != 0:
        print(f"{' '.join(cmd)} failed: {(r.stderr.strip() or r.stdout.strip())[-500:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_json_sampled(cluster, cmd, timeout):
    """run_json, with the members' CPU sampled meanwhile: the result gains
    recovery_cpu, the members' CPU seconds over the generator's recovery
    (its failed_ns to done1_ns, on the steady clock time.monotonic_ns reads)."""
    samples, stop = [], threading.Event()

    def sample():
        while not stop.wait(0.05):
            samples.append((time.monotonic_ns(), sum(member_cpu(cluster))))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        r = run_json(cmd, timeout)
    finally:
        stop.set()
        sampler.join()
    if r and r.get("failed_ns") and r.get("done1_ns") and samples:
        def at(ns):
            before = [c for t, c in samples if t <= ns]
            return before[-1] if before else samples[0][1]
        r["recovery_cpu"] = at(r["done1_ns"] + 50_000_000) - at(r["failed_ns"])
    return r


def sim_procs(n):
    """etcd_sim's processes for n agents: an agent holds up to four
    connections at once (its unary one and three watches), and one process
    may open about 20,000 descriptors here."""
    return max(1, -(-n * 4 // 18000))


def recover_rows(build, args, cluster, port, rows):
    """One failure -> every agent holds the next round's assignment. With
    --generator sim: etcd_sim over etcd beside rdzv_sim over cxxrun-rdzv,
    event-driven, with each phase; with threads: rdzv_load (the real code in
    a thread per agent), whose re-join and assignment are one figure."""
    gens = args.generator or ["sim"]
    rows.append(f"recover: the agents renew their leases every {args.keep_alive:g} s"
                + ("; agent i asks member i mod 3 first" if args.spread else "")
                + f"; generators: {', '.join(gens)}" + (f" at nice {args.nice}" if args.nice else ""))
    drawn = {}  # n -> {backend: (median abort push, median recovery)}
    for n in args.recover_nodes or (100, 1000):
        timeout = max(60, n // 10)
        spread = ["--spread", "1"] if args.spread else []
        load = ["--keep-alive", str(args.keep_alive)] + spread
        bench = lambda name: os.path.join(build, "bench", name)  # noqa: E731
        kinds = []  # (label, backend, argv)
        if "sim" in gens:
            kinds.append(("c10d (rdzv_sim)", "c10d", [bench("rdzv_sim"), "--port", str(port), "--timeout", str(timeout)]))
            kinds.append(("etcd (etcd_sim)", "etcd", [bench("etcd_sim"), "--etcd", cluster.endpoints(),
                                                       "--procs", str(sim_procs(n)), "--timeout", str(timeout)] + load))
        if "threads" in gens:
            threads = [bench("rdzv_load"), "--procs", str(max(1, -(-n // 1000))), "--timeout", str(timeout)]
            if "sim" not in gens:
                kinds.append(("c10d (rdzv_load)", "c10d", threads + ["--port", str(port)]))
            kinds.append(("etcd (rdzv_load)", "etcd", threads + ["--etcd", cluster.endpoints()] + load))
        if args.baseline:
            where = os.path.abspath(args.baseline)
            if "sim" in gens and os.path.exists(os.path.join(where, "bench", "etcd_sim")):
                kinds.append(("etcd (baseline etcd_sim)", "etcd", [os.path.join(where, "bench", "etcd_sim"),
                                                                    "--etcd", cluster.endpoints(), "--procs",
                                                                    str(sim_procs(n)), "--timeout", str(timeout)] + load))
            if "threads" in gens or "sim" not in gens:
                extra = ["--procs", str(max(1, -(-n // 1000)))] if knows_procs(where) else []
                kinds.append(("etcd (baseline rdzv_load)", "etcd", [os.path.join(where, "bench", "rdzv_load"),
                                                                      "--etcd", cluster.endpoints()] + extra + load))
        got = {label: [] for label, _, _ in kinds}
        ttl = math.ceil(args.keep_alive * 3)  # the agents' lease TTL (keep_alive_max_attempt 3)
        last_end = 0.0
        for _ in range(args.runs):
            for label, backend, argv in kinds:
                if backend == "etcd":
                    # The last run's leases (not revoked: its job ended well)
                    # lapse first, so that etcd's count of expired leases
                    # during this run is this run's lapses, and etcd has
                    # revoked them: it revokes 1,000 a second, so 10,000
                    # lapsing took 10 s into the next run.
                    time.sleep(max(0.0, last_end + ttl + 2 + n / 1000 - time.monotonic()))
                    compact(cluster)
                before, expired = member_cpu(cluster), leases_expired(cluster)
                r = run_json_sampled(cluster, argv + ["--nodes", str(n), "--recover", "1"], timeout=max(240, n // 5))
                spent = [b - a for a, b in zip(before, member_cpu(cluster))]
                if backend == "etcd":
                    last_end = time.monotonic()
                if r:
                    if backend == "etcd":
                        r["expired"] = leases_expired(cluster) - expired
                    r["busiest_cpu"], r["all_cpu"] = max(spent), sum(spent)
                    r["load1"] = os.getloadavg()[0]
                    if "rejoin_assign_s" not in r and "rejoin_s" in r:
                        r["rejoin_assign_s"] = r["rejoin_s"] + r["assign_s"]
                got[label].append(r)
        print(f"[bench] recover {n}: {json.dumps(got)}", file=sys.stderr)
        pick = lambda label, key: [r.get(key) if r else None for r in got[label]]  # noqa: E731
        drawn[n] = medians_to_draw(got)
        rows.append(f"| {n:,} agents | " + " | ".join(label for label, _, _ in kinds) + " |")
        rows.append("|---|" + "---|" * len(kinds))
        for title, key, digits in (("one failure -> every agent re-assigned", "recovery_s", 3),
                                   ("abort event reaching every agent", "abort_push_s", 3),
                                   ("re-join (to round 1 complete for all)", "rejoin_s", 3),
                                   ("assignment and master", "assign_s", 3),
                                   ("re-join and assignment", "rejoin_assign_s", 3),
                                   ("alive keys deleted under the agents' watches (etcd_sim)", "lapses", 0),
                                   ("leases found expired and granted again (etcd_sim)", "regranted", 0),
                                   ("requests refused and sent again, as our client does (etcd_sim)", "retries", 0),
                                   ("leases expired during the run (etcd's lease_expired_total)", "expired", 0),
                                   ("CPU seconds, busiest etcd member (both rounds)", "busiest_cpu", 1),
                                   ("CPU seconds, all etcd members", "all_cpu", 1),
                                   ("of which over the recovery (sampled every 50 ms)", "recovery_cpu", 1),
                                   ("CPU seconds of the generator (etcd_sim), both rounds", "generator_cpu", 1),
                                   ("load average (1 min) after the run", "load1", 2)):
            cells = []
            for label, backend, _ in kinds:
                v = pick(label, key)
                skip = key.endswith("cpu") and backend == "c10d" or all(x is None for x in v) and key != "recovery_s"
                cells.append("" if skip else fmt(v, unit="" if key in ("lapses", "regranted", "retries", "expired", "load1") or key.endswith("cpu") else "s",
                                                  digits=digits))
            rows.append(f"| {title} | " + " | ".join(cells) + " |")
    if args.plot:
        draw_recovery(drawn, args.plot, args.keep_alive, etcd_version())


# The gRPC methods the rendezvous calls, as each member counts them
# (grpc_server_started_total: a watch or keep-alive stream counts when it opens).
METHODS = ("Range", "Put", "Txn", "DeleteRange", "Watch", "LeaseGrant", "LeaseKeepAlive")


def started_calls(cluster):
    """{gRPC method: calls started}, summed over the members."""
    import urllib.request
    out = dict.fromkeys(METHODS, 0)
    for m in cluster.members:
        body = urllib.request.urlopen(f"http://{m.endpoint}/metrics", timeout=5).read().decode()
        for line in body.splitlines():
            if line.startswith("grpc_server_started_total{"):
                method = line.split('grpc_method="', 1)[1].split('"', 1)[0]
                if method in out:
                    out[method] += int(float(line.rsplit(" ", 1)[1]))
    return out


def leases_expired(cluster):
    """etcd_debugging_server_lease_expired_total, summed over the members
    (the leader counts the leases it expires)."""
    return int(cluster.metric_total("etcd_debugging_server_lease_expired_total"))


def validate_rows(build, args, rows):
    """rdzv_load (the product's requests) and etcd_sim, the same job of N
    agents with one recovery, each against a fresh three-member cluster:
    the calls each member started per method, per agent."""
    n = args.validate_nodes
    load = ["--keep-alive", str(args.keep_alive)] + (["--spread", "1"] if args.spread else [])
    per = {}
    for name in ("rdzv_load", "etcd_sim"):
        cluster = EtcdCluster(3)
        cluster.start()
        try:
            before = started_calls(cluster)
            r = run_json([os.path.join(build, "bench", name), "--etcd", cluster.endpoints(), "--nodes", str(n),
                          "--recover", "1"] + load, timeout=240)
            time.sleep(0.5)  # the last watches' streams closed
            after = started_calls(cluster)
        finally:
            cluster.stop()
        per[name] = {m: (after[m] - before[m]) / n for m in METHODS}
        print(f"[bench] validate {name}: {json.dumps(r)}", file=sys.stderr)
    rows.append(f"| calls per agent, {n} agents, one recovery (all members) | rdzv_load (real code) | etcd_sim | etcd_sim / rdzv_load |")
    rows.append("|---|---|---|---|")
    for m in METHODS:
        a, b = per["rdzv_load"][m], per["etcd_sim"][m]
        rows.append(f"| {m} | {a:.2f} | {b:.2f} | {b / a:.2f} |" if a else f"| {m} | {a:.2f} | {b:.2f} | |")


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
