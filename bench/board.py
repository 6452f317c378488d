#!/usr/bin/python3
"""cxxrunctl status against the job board of N simulated agents: bench/board_sim
writes N agents' records (8 ranks each, the agents' own record builder) into a
real cxxrun-rdzv, then `cxxrunctl status --json` and `status` run --runs times
each, one at a time, and each run's wall time (process start to exit: connect,
index, MULTI_GETs of 1,000, parse, print) is kept.

    /usr/bin/python3 bench/board.py [--nodes 1000 --nodes 10000] [--runs 10] [--build build]

Prints a markdown table: nodes, record bytes, the board's bytes, and the
median, min and max of each form's time, and cxxrun-rdzv's peak RSS.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1


def timed(cmd):
    began = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - began
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
    return took, p.stdout


def one_size(args, nodes):
    port = free_port()
    server = subprocess.Popen([os.path.join(args.build, "bin", "cxxrun-rdzv"), f"--port={port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if listening(port):
                break
            time.sleep(0.05)
        sim = subprocess.run([os.path.join(args.build, "bench", "board_sim"), "--port", str(port), "--nodes",
                              str(nodes), "--run-id", "sim"], capture_output=True, text=True, timeout=600, check=True)
        written = json.loads(sim.stdout)
        ctl = [os.path.join(args.build, "bin", "cxxrunctl"), f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=sim",
               "status"]
        times = {"json": [], "text": []}
        board_bytes = 0
        for _ in range(args.runs):
            t, out = timed(ctl + ["--json"])
            doc = json.loads(out)
            if len(doc["nodes"]) != nodes:
                raise SystemExit(f"status --json listed {len(doc['nodes'])} of {nodes} nodes")
            board_bytes = len(out)
            times["json"].append(t)
            t, out = timed(ctl)
            if not out.startswith(f"job sim: {nodes} nodes, {nodes * 8} ranks"):
                raise SystemExit("status did not list every node: " + out[:200])
            times["text"].append(t)
        return written, board_bytes, times, vm_hwm_mib(server.pid)
    finally:
        server.kill()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    args = parser.parse_args()
    sizes = args.nodes or [1000, 10000]
    print("| agents | ranks | record (B) | status --json output (MB) | --json median (ms) | min | max "
          "| text median (ms) | min | max | cxxrun-rdzv peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for nodes in sizes:
        written, board_bytes, t, rss = one_size(args, nodes)
        ms = {k: [x * 1000 for x in v] for k, v in t.items()}
        print(f"| {nodes} | {nodes * 8} | {written['record_bytes']} | {board_bytes / 1e6:.1f} "
              f"| {statistics.median(ms['json']):.0f} | {min(ms['json']):.0f} | {max(ms['json']):.0f} "
              f"| {statistics.median(ms['text']):.0f} | {min(ms['text']):.0f} | {max(ms['text']):.0f} | {rss:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
