#!/usr/bin/env bash
# Rendezvous and store benchmarks, side by side in one run:
#  1. 1,000 simulated agents rendezvous at cxxrun-rdzv (rdzv_load), 3 runs;
#  2. store throughput, 64 clients, SET+GET per iteration, against cxxrun-rdzv
#     and torch's TCPStore server(s), same driver, 3 alternating runs each,
#     with each server's CPU time per operation; store_floor (epoll + one recv
#     and one send per request, no store) shows what any server's kernel share
#     allows on this machine.
# Usage: bench/store.sh [build-dir]   (run scripts/build.sh first)
#   TORCH_PYTHON (default /usr/bin/python3, Debian's torch 1.13): whose server to compare with.
#     torch 1.13 speaks the legacy protocol; with torch 2.x the driver speaks the modern one and
#     both of its servers are measured (libuv, the default, and the classic one).
#   THREADS (default 1): driver threads; more on a machine with cores to spare.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
python=${TORCH_PYTHON:-/usr/bin/python3}
threads=${THREADS:-1}
port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { local t=0 f; for f in /proc/"$1"/task/*/stat; do t=$((t + $(awk '{print $14+$15}' "$f"))); done; echo "$t"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

version=$("$python" -c 'import torch; print(torch.__version__)')
protocol=modern
libuv_choices=(True False)
case "$version" in 1.*|2.0*|2.1.*) protocol=legacy; libuv_choices=(default) ;; esac

ours=$(port)
"$build/bin/cxxrun-rdzv" --port "$ours" >/dev/null 2>&1 & ours_pid=$!; pids+=($ours_pid)
floor=$(port)
"$build/bench/store_floor" --port "$floor" & floor_pid=$!; pids+=($floor_pid)
names=("cxxrun-rdzv" "floor (store_floor)") server_pids=("$ours_pid" "$floor_pid") server_ports=("$ours" "$floor")
for libuv in "${libuv_choices[@]}"; do  # torch's server, one process each
  p=$(port)
  ready=$(mktemp)
  extra=""; name="torch $version"
  if [ "$libuv" != default ]; then extra=", use_libuv=$libuv"; name="torch $version (use_libuv=$libuv)"; fi
  "$python" -c "
import datetime, time
import torch.distributed as d
s = d.TCPStore('127.0.0.1', $p, 1, True, datetime.timedelta(seconds=60), wait_for_workers=False$extra)
print('ready', flush=True)
time.sleep(600)
" > "$ready" 2>&1 & pid=$!; pids+=($pid)
  for _ in $(seq 300); do grep -q ready "$ready" && break; sleep 0.1; done
  grep -q ready "$ready" || { cat "$ready" >&2; exit 1; }
  rm -f "$ready"
  names+=("$name") server_pids+=("$pid") server_ports+=("$p")
done

echo "## rendezvous of 1000 simulated agents (cxxrun-rdzv, 8 workers each)"
for i in 1 2 3; do timeout 120 "$build/bench/rdzv_load" --port "$ours" --nodes 1000; done

echo "## store throughput, 64 clients, $threads driver thread(s), $protocol protocol, SET+GET per iteration, 64-byte values, 3 s per run"
hz=$(getconf CLK_TCK)
measure() {  # name pid port
  local before after out ops
  before=$(cpu_ticks "$2")
  out=$(timeout 60 "$build/bench/store_load" --port "$3" --clients 64 --threads "$threads" --protocol "$protocol" --seconds 3)
  after=$(cpu_ticks "$2")
  ops=$(echo "$out" | sed 's/.*"ops": \([0-9]*\).*/\1/')
  echo "$1: $out server_cpu_us_per_op=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$ops" 'BEGIN{printf "%.2f", t / hz * 1e6 / n}')"
}
for i in 1 2 3; do
  for s in "${!names[@]}"; do measure "${names[$s]}" "${server_pids[$s]}" "${server_ports[$s]}"; done
done
