#!/usr/bin/env bash
# Rendezvous and store benchmarks (issue: rendezvous), side by side in one run:
#  1. 1,000 simulated agents rendezvous at cxxrun-rdzv (rdzv_load), 3 runs;
#  2. store throughput, 64 clients, 50/50 set/get, against cxxrun-rdzv and
#     against torch 1.13's TCPStore server (Debian python3-torch), same client.
# Usage: bench/store.sh [build-dir]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

p=$(port)
"$build/bin/cxxrun-rdzv" --port "$p" >/dev/null 2>&1 & pids+=($!)
sleep 0.3
echo "## rendezvous of 1000 simulated agents (cxxrun-rdzv, 8 workers each)"
for i in 1 2 3; do timeout 120 "$build/bench/rdzv_load" --port "$p" --nodes 1000; done

echo "## store throughput, 64 clients, 50/50 set/get, 64-byte values, 3 s"
echo -n "cxxrun-rdzv:      "; timeout 60 "$build/bench/store_load" --port "$p" --clients 64 --seconds 3
tp=$(port)
/usr/bin/python3 -c "
import datetime, sys, time
import torch.distributed as d
s = d.TCPStore('127.0.0.1', $tp, 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
print('ready', flush=True)
time.sleep(120)
" > /tmp/torch_store_ready.$$ 2>&1 & pids+=($!)
for _ in $(seq 100); do grep -q ready /tmp/torch_store_ready.$$ 2>/dev/null && break; sleep 0.1; done
rm -f /tmp/torch_store_ready.$$
echo -n "torch 1.13 store: "; timeout 60 "$build/bench/store_load" --port "$tp" --clients 64 --seconds 3
