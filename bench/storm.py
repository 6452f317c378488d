#!/usr/bin/python3
"""A connect storm on the workers' store (the one the agent serves on
MASTER_PORT): N clients connect at once, each does one SET and one GET, as
every rank's init_process_group does, and stays connected (bench/connect_storm.cc).

    /usr/bin/python3 bench/storm.py [--cxxrun PATH] [--storm PATH] [--clients 100000 ...] [--runs 1]

Root. Everything runs in a network namespace of its own (`unshare --net`):
its loopback is the only interface that sees traffic, and the kernel limits a
storm needs (net.core.somaxconn, net.ipv4.tcp_max_syn_backlog, the port
range) are raised there, never on this machine's own network. The agent and
the generator get RLIMIT_NOFILE for the clients (the agent's from its parent:
this script raises its own before it starts it).

The agent is a real one: `cxxrun --rdzv-backend=c10d --nnodes=1`, so that it
hosts the workers' store (TORCHELASTIC_USE_AGENT_STORE=True), with one
worker that writes MASTER_PORT and sleeps; the generator stops it after.
"""
import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import netns

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def start_agent(cxxrun, scratch, agent_nofile):
    portfile = os.path.join(scratch, "master_port")
    worker = os.path.join(scratch, "w.sh")
    with open(worker, "w") as f:
        f.write(f'#!/bin/sh\necho "$MASTER_PORT $TORCHELASTIC_USE_AGENT_STORE" > {portfile}.tmp\n'
                f'mv {portfile}.tmp {portfile}\nexec sleep 600\n')
    os.chmod(worker, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    agent = subprocess.Popen([cxxrun, "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29400", "--nnodes=1",
                              "--nproc-per-node=1", "--no-python", worker],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(scratch, "agent.log"), "w"), env=env,
                             preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (
                                 agent_nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))) if agent_nofile else None)
    for _ in range(300):
        if os.path.exists(portfile):
            port, agent_store = open(portfile).read().split()
            if agent_store != "True":
                raise SystemExit("storm: the agent does not serve the workers' store here")
            return agent, int(port)
        if agent.poll() is not None:
            raise SystemExit("storm: the agent exited:\n" + open(os.path.join(scratch, "agent.log")).read())
        time.sleep(0.05)
    raise SystemExit("storm: no MASTER_PORT from the worker in 15 s")


def one_run(args, clients):
    with tempfile.TemporaryDirectory(prefix="cxxrun-storm-") as scratch:
        agent, port = start_agent(args.cxxrun, scratch, args.agent_nofile)
        try:
            out = subprocess.run([args.storm, "--port", str(port), "--clients", str(clients), "--timeout",
                                  str(args.timeout), "--server-pid", str(agent.pid), "--max-open", str(args.max_open)],
                                 capture_output=True, text=True, timeout=args.timeout + 60)
            if out.returncode != 0 and not out.stdout.strip():
                raise SystemExit(f"storm: connect_storm failed: {out.stderr}")
            result = json.loads(out.stdout)
            result["generator_rc"] = out.returncode
            return result
        finally:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cxxrun", default=os.environ.get("CXXRUN", os.path.join(REPO, "build/bin/cxxrun")))
    ap.add_argument("--storm", default=os.path.join(REPO, "build/bench/connect_storm"))
    ap.add_argument("--clients", type=int, action="append")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--agent-nofile", type=int, default=0,
                    help="the agent's soft RLIMIT_NOFILE at its start (default: this script's, raised)")
    outside = netns.enter(__file__)
    if outside is not None:
        return outside
    args = ap.parse_args()
    sizes = args.clients or [1000, 10000, 100000]
    got = netns.raise_nofile(max(sizes) + 1024)
    # Where the hard limit stays below the storm (no CAP_SYS_RESOURCE), at
    # most this many clients hold a connection at once; the rest wait for
    # room (connect_storm --max-open).
    args.max_open = min(max(sizes), got - 1024)
    if args.max_open < max(sizes):
        print(f"RLIMIT_NOFILE's hard limit here is {got}: at most {args.max_open:,} clients are connected at once, "
              "the others connect as finished ones close", flush=True)
    print("| clients | run | wall (s) | client p50 / p99 / max (ms) | connect retries | most open at once | server peak fds | server peak RSS (MiB) |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        for run in range(1, args.runs + 1):
            r = one_run(args, n)
            print(f"| {n:,} | {run} | {r['wall_s']:.2f} | {r['client_ms_p50']:.0f} / {r['client_ms_p99']:.0f} / "
                  f"{r['client_ms_max']:.0f} | {r['connect_retries']} | {r['peak_open']:,} | {r.get('server_peak_fds', -1):,} | "
                  f"{r.get('server_peak_rss_mib', -1):.0f} |" + ("" if r["done"] == n else f" only {r['done']} done"),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
