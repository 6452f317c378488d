#!/bin/bash
# The timeline picture of bench/RESULTS.md ("A job's timeline"), drawn from
# the event logs of a real job: two cxxrun agents on loopback (c10d on
# 127.0.0.1, two workers each, an event log each) run a trainer that loads
# for a second, prints 'step N' every 0.1 s to step 40 and checkpoints every
# 10 steps (rank 0, into --checkpoint-dir); rank 3 raises ValueError at step
# 25 once, the job restarts from the step-20 checkpoint and completes.
#
#   bench/timeline.sh [OUT.png]        (default: bench/timeline.png)
#
# CXXRUN picks the binary (default build/bin/cxxrun), PYTHON the interpreter
# that draws (default /usr/bin/python3, which needs python3-matplotlib);
# KEEP=DIR copies the job's event logs and agents' output there. About 15 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
CXXRUN=${CXXRUN:-$root/build/bin/cxxrun}
PYTHON=${PYTHON:-/usr/bin/python3}
out=${1:-$here/timeline.png}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/train.py" <<'EOF'
import os, sys, time
ckpt, marker = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
time.sleep(1.0)  # loading the model
saved = [int(name.split("-")[1]) for name in os.listdir(ckpt)]
for step in range(max(saved, default=0) + 1, 41):
    time.sleep(0.1)
    print(f"step {step}", flush=True)
    if rank == 0 and step % 10 == 0:
        open(os.path.join(ckpt, f"ckpt-{step}"), "w").close()
    if rank == 3 and step == 25 and not os.path.exists(marker):
        open(marker, "w").close()
        raise ValueError("loss is NaN")
EOF
mkdir "$work/ckpt"
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

pids=()
for node in 0 1; do
  timeout 300 "$CXXRUN" --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$port" --rdzv-id="timeline-$$" \
    --nnodes=2 --nproc-per-node=2 --max-restarts=2 --progress-pattern='step (\d+)' \
    --checkpoint-dir="$work/ckpt" --event-log="$work/agent$node.jsonl" \
    "$work/train.py" "$work/ckpt" "$work/failed-once" >"$work/agent$node.out" 2>&1 &
  pids+=($!)
done
failed=0
for node in 0 1; do
  wait "${pids[$node]}" || { echo "timeline.sh: agent $node exited $?:" >&2; tail -20 "$work/agent$node.out" >&2; failed=1; }
done
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$work"/agent*.jsonl "$work"/agent*.out "$KEEP"/
fi
[ "$failed" = 0 ] || exit 1

PYTHONPATH="$root/agent/python" PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m cxxrun.timeline \
  "$work/agent0.jsonl" "$work/agent1.jsonl" -o "$out" \
  --title "2 nodes on loopback (c10d), rank 3 raises at step 25 once, restart from the step-20 checkpoint"
