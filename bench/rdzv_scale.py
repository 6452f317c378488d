#!/usr/bin/python3
"""The c10d rendezvous at scale: N simulated agents join one job's first round
through a real cxxrun-rdzv, driven from one thread by bench/rdzv_sim (the
requests C10dRendezvous makes, one at a time per agent, on a connection each),
with --threads-too the thread-per-agent bench/rdzv_load (our real
C10dRendezvous code) beside it for the sizes it can carry.

    /usr/bin/python3 bench/rdzv_scale.py [--nodes 1000 --nodes 10000 ...] [--runs 3] [--threads-too]
    /usr/bin/python3 bench/rdzv_scale.py --recover [--nodes ...] [--runs 3] [--plot bench/recovery.png]

Root: everything runs in a network namespace of its own (bench/netns.py), the
store on its loopback. Prints a markdown table: the wall time from the first
connect to the last agent holding its assignment, when each phase ended
(every agent connected, joined: every ADD answered, the round complete for
all, the assignments written), microseconds per agent (flat when linear),
cxxrun-rdzv's peak RSS, and whether ranks 0..N-1 came out once each.

--recover: after the first round, one member's worker fails and the job
re-forms (rdzv_sim --recover 1): the time from the failure record to every
agent holding its next-round assignment, in phases (the abort event reaching
every agent, the new round's joins until it is complete for all, the
assignments), and with --plot a PNG of each phase against N (Debian's
python3-matplotlib). --baseline-sim PATH: an earlier build's rdzv_sim (the
requests an earlier C10dRendezvous made) run against the same cxxrun-rdzv,
alternating run by run with this one, and a table of the medians of both
and their ratio; --baseline-rdzv PATH runs that earlier build's own
cxxrun-rdzv under it (without it, both run against --rdzv). Each row says
the load average (1 min) when its run ended: the machine may be shared.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

import netns

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 29400  # the namespace is ours: any port is free


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1


def cpu_s(pid):
    """The process's CPU seconds so far (user + system): on a machine shared
    with other work, what the store spent is steadier than the wall time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(args, tool, nodes, rdzv=None):
    server = subprocess.Popen([rdzv or args.rdzv, f"--port={PORT}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if listening(PORT):
                break
            time.sleep(0.05)
        cmd = [tool, "--port", str(PORT), "--nodes", str(nodes)] + (["--recover", "1"] if args.recover else [])
        # The store's CPU every 10 ms (its clock ticks at 100 Hz), to take
        # what the recovery alone cost: the first round is the same for both
        # builds and would blur their difference.
        samples, running = [], threading.Event()
        running.set()

        def sample():
            while running.is_set():
                samples.append((time.monotonic(), cpu_s(server.pid)))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        started = time.monotonic()
        sampler.start()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        finally:
            running.clear()
            sampler.join()
        if not out.stdout.strip():
            raise SystemExit(f"rdzv_scale: {tool} failed: {out.stderr}")
        result = json.loads(out.stdout)
        result["rss"] = vm_hwm_mib(server.pid)
        result["store_cpu_s"] = cpu_s(server.pid)
        if args.recover:
            # The failure is published when the first round is done, `seconds` after the generator started.
            failed_at = started + result["seconds"]
            before = [cpu for t, cpu in samples if t <= failed_at]
            result["recovery_cpu_s"] = result["store_cpu_s"] - (before[-1] if before else 0.0)
        result["rc"] = out.returncode
        result["load"] = os.getloadavg()[0]
        return result
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rdzv", default=os.path.join(REPO, "build/bin/cxxrun-rdzv"))
    ap.add_argument("--sim", default=os.path.join(REPO, "build/bench/rdzv_sim"))
    ap.add_argument("--load", default=os.path.join(REPO, "build/bench/rdzv_load"))
    ap.add_argument("--nodes", type=int, action="append")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--threads-too", action="store_true")
    ap.add_argument("--recover", action="store_true")
    ap.add_argument("--plot", help="with --recover: where to draw the phases against N (PNG)")
    ap.add_argument("--baseline-sim", help="with --recover: an earlier build's rdzv_sim, run alternately beside this one")
    ap.add_argument("--baseline-rdzv", help="with --baseline-sim: that build's cxxrun-rdzv (default: --rdzv)")
    outside = netns.enter(__file__)
    if outside is not None:
        return outside
    args = ap.parse_args()
    sizes = args.nodes or [1000, 2000, 5000, 10000]
    netns.raise_nofile(max(sizes) + 1024)
    if args.recover:
        return recovery(args, sizes)
    print("| generator | agents | run | wall (s) | connected / joined / complete / assigned (s) | µs per agent "
          "| cxxrun-rdzv peak RSS (MiB) | ranks |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    for n in sizes:
        for run in range(1, args.runs + 1):
            for name, tool in (("one thread", args.sim), ("thread per agent", args.load)):
                if name != "one thread" and not args.threads_too:
                    continue
                r = one_run(args, tool, n)
                phases = " / ".join(f"{r[k]:.2f}" for k in ("connected_s", "joined_s", "complete_s", "assigned_s")
                                    ) if "joined_s" in r else "-"
                ok = r.get("ranks_ok", r.get("failures", 1) == 0) and r["rc"] == 0
                print(f"| {name} | {n:,} | {run} | {r['seconds']:.2f} | {phases} | {r['seconds'] / n * 1e6:.0f} "
                      f"| {r['rss']:.0f} | {'0..N-1 once each' if ok else 'WRONG'} |", flush=True)
    return 0


PHASES = (("abort_push_s", "abort event reaches every agent"), ("rejoin_s", "re-join: the new round complete for all"),
          ("assign_s", "every agent holds its assignment"))


def recovery(args, sizes):
    builds = [("this build", args.sim, args.rdzv)] + (
        [("baseline", args.baseline_sim, args.baseline_rdzv or args.rdzv)] if args.baseline_sim else [])
    print("| build | agents | run | one failure -> every agent re-assigned (s) | abort push (s) | re-join (s) "
          "| assign (s) | µs per agent | cxxrun-rdzv CPU, both rounds (s) | of which the recovery (s) | load (1 min) "
          "| ranks |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    medians = {name: {} for name, _, _ in builds}
    for n in sizes:
        results = {name: [] for name, _, _ in builds}
        for run in range(1, args.runs + 1):
            for name, sim, rdzv in builds:
                r = one_run(args, sim, n, rdzv)
                results[name].append(r)
                ok = r["ranks_ok"] and r["rc"] == 0
                print(f"| {name} | {n:,} | {run} | {r['recovery_s']:.3f} | {r['abort_push_s']:.3f} "
                      f"| {r['rejoin_s']:.3f} | {r['assign_s']:.3f} | {r['recovery_s'] / n * 1e6:.0f} "
                      f"| {r['store_cpu_s']:.2f} | {r['recovery_cpu_s']:.2f} | {r['load']:.1f} "
                      f"| {'0..N-1 once each' if ok else 'WRONG'} |",
                      flush=True)
        for name, _, _ in builds:
            medians[name][n] = {k: sorted(r[k] for r in results[name])[len(results[name]) // 2]
                                for k in ("recovery_s", "store_cpu_s", "recovery_cpu_s") + tuple(k for k, _ in PHASES)}
    if args.baseline_sim:
        print("\n| agents | median recovery: this build (s) | baseline (s) | baseline / this build "
              "| median cxxrun-rdzv CPU: this build (s) | baseline (s) | baseline / this build "
              "| median cxxrun-rdzv CPU in the recovery: this build (s) | baseline (s) | baseline / this build |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            now, before = medians["this build"][n], medians["baseline"][n]
            print(f"| {n:,} | {now['recovery_s']:.3f} | {before['recovery_s']:.3f} "
                  f"| {before['recovery_s'] / now['recovery_s']:.2f}× | {now['store_cpu_s']:.2f} "
                  f"| {before['store_cpu_s']:.2f} | {before['store_cpu_s'] / now['store_cpu_s']:.2f}× "
                  f"| {now['recovery_cpu_s']:.2f} | {before['recovery_cpu_s']:.2f} "
                  f"| {before['recovery_cpu_s'] / max(now['recovery_cpu_s'], 0.01):.2f}× |")
    if args.plot:
        draw(medians, args.plot)
    return 0


def draw(medians, path):
    """Each build's phases stacked, the builds side by side at each N."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    builds = list(medians)
    sizes = sorted(medians[builds[0]])
    fig, ax = plt.subplots(figsize=(7.5 if len(builds) > 1 else 7, 4.2))
    width = 0.8 / len(builds)
    colors = ("tab:blue", "tab:orange", "tab:green")
    for b, build in enumerate(builds):
        xs = [i + (b - (len(builds) - 1) / 2) * width for i in range(len(sizes))]
        bottom = [0.0] * len(sizes)
        for (key, label), color in zip(PHASES, colors):
            values = [medians[build][n][key] for n in sizes]
            ax.bar(xs, values, width * 0.95, bottom=bottom, color=color, alpha=1.0 if b == 0 else 0.45,
                   label=label if b == 0 else None)
            bottom = [t + v for t, v in zip(bottom, values)]
        for x, total in zip(xs, bottom):
            ax.annotate(f"{total:.2f} s" + ("" if len(builds) == 1 else f"\n{build}"), (x, total), ha="center",
                        va="bottom", fontsize=7)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{n:,}" for n in sizes])
    ax.set_xlabel("simulated agents (c10d rendezvous, cxxrun-rdzv, one thread)"
                  + ("" if len(builds) == 1 else "; faded: " + ", ".join(builds[1:])))
    ax.set_ylabel("seconds (median)")
    ax.set_title("In-job recovery: one failure -> every agent holds its next-round assignment")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    sys.exit(main())
