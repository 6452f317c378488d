#!/usr/bin/env bash
# Rendezvous and store benchmarks, side by side in one run:
#  1. 1,000 simulated agents rendezvous at cxxrun-rdzv (rdzv_load), 3 runs;
#  2. store throughput, 64 clients, SET+GET per iteration, against cxxrun-rdzv
#     and torch 1.13's TCPStore server (Debian python3-torch), same driver,
#     3 alternating runs each, with the server's CPU time per operation.
# Usage: bench/store.sh [build-dir]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { local t=0 f; for f in /proc/"$1"/task/*/stat; do t=$((t + $(awk '{print $14+$15}' "$f"))); done; echo "$t"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

ours=$(port)
"$build/bin/cxxrun-rdzv" --port "$ours" >/dev/null 2>&1 & ours_pid=$!; pids+=($ours_pid)
theirs=$(port)
ready=$(mktemp)
/usr/bin/python3 -c "
import datetime, time
import torch.distributed as d
s = d.TCPStore('127.0.0.1', $theirs, 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
print('ready', flush=True)
time.sleep(600)
" > "$ready" 2>&1 & theirs_pid=$!; pids+=($theirs_pid)
for _ in $(seq 100); do grep -q ready "$ready" && break; sleep 0.1; done
rm -f "$ready"

echo "## rendezvous of 1000 simulated agents (cxxrun-rdzv, 8 workers each)"
for i in 1 2 3; do timeout 120 "$build/bench/rdzv_load" --port "$ours" --nodes 1000; done

echo "## store throughput, 64 clients, SET+GET per iteration, 64-byte values, 3 s per run"
hz=$(getconf CLK_TCK)
measure() {  # name pid port
  local before after out ops
  before=$(cpu_ticks "$2")
  out=$(timeout 60 "$build/bench/store_load" --port "$3" --clients 64 --seconds 3)
  after=$(cpu_ticks "$2")
  ops=$(echo "$out" | sed 's/.*"ops": \([0-9]*\).*/\1/')
  echo "$1 $out server_cpu_us_per_op=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$ops" 'BEGIN{printf "%.2f", t / hz * 1e6 / n}')"
}
for i in 1 2 3; do
  measure "cxxrun-rdzv:     " "$ours_pid" "$ours"
  measure "torch 1.13 store:" "$theirs_pid" "$theirs"
done
