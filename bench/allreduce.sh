#!/usr/bin/env bash
# Allreduce, float32 sum in place, 4 KiB..64 MiB: cxxrun's runtime
# (examples/allreduce_perf) against torch.distributed on the same backend
# (bench/torch_allreduce_perf.py), both launched by cxxrun, alternating in one
# session. Prints bandwidth per size and the ratio: busbw with more than one
# rank, algbw with one (busbw is 0 there).
#
# Usage: bench/allreduce.sh [gloo|nccl] [build-dir] [rounds] [ranks]
#   gloo: ranks default 4, torch from /usr/bin/python3 (Debian's 1.13)
#   nccl: ranks default to the GPUs (--nproc-per-node=gpu); set TORCH_PYTHON
#         to the python with a CUDA torch (the GPU machine: /opt/torch/.venv/bin/python3)
# (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-gloo}
build=$(cd "${2:-build}" && pwd)
rounds=${3:-2}
case "$backend" in
  gloo) ranks=${4:-4} ;;
  nccl) ranks=${4:-gpu} ;;
  *) echo "bench/allreduce.sh: backend must be gloo or nccl, not '$backend'" >&2; exit 2 ;;
esac
python=${TORCH_PYTHON:-/usr/bin/python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  # allreduce_perf: size count type redop time algbw busbw wrong; torch: size time algbw busbw.
  timeout 600 "$build/bin/cxxrun" --standalone --nproc-per-node="$ranks" "$build/examples/allreduce_perf" \
    --backend "$backend" --min-bytes 4096 --max-bytes 67108864 --iters 20 --warmup 5 2>"$out/cxxrun.err" |
    sed -n 's/^\[default0\]://p' | tee -a "$out/cxxrun.log" |
    awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $1, $6, $7}' >> "$out/cxxrun" || { cat "$out/cxxrun.err" >&2; exit 1; }
  PYTHON_EXEC="$python" timeout 600 "$build/bin/cxxrun" --standalone --nproc-per-node="$ranks" \
    bench/torch_allreduce_perf.py 4096 67108864 20 5 "$backend" 2>"$out/torch.err" |
    sed -n 's/^\[default0\]:\([0-9]*\) [0-9.]* \([0-9.]*\) \([0-9.]*\)$/\1 \2 \3/p' >> "$out/torch" ||
    { cat "$out/torch.err" >&2; exit 1; }
done
"$python" - "$out/cxxrun" "$out/torch" "$backend" "$("$python" -c 'import torch; print(torch.__version__)')" <<'PY'
import statistics, sys
def load(path):
    by, world_one = {}, True
    for line in open(path):
        size, algbw, busbw = line.split()
        by.setdefault(int(size), []).append((float(algbw), float(busbw)))
        world_one = world_one and float(busbw) == 0.0
    return {k: tuple(statistics.median(x[i] for x in v) for i in (0, 1)) for k, v in by.items()}, world_one
(c, one), (t, _) = load(sys.argv[1]), load(sys.argv[2])
col, name = (0, "algbw") if one else (1, "busbw")
backend, version = sys.argv[3], sys.argv[4]
print(f"| size | cxxrun {name} GB/s | torch {version} {backend} {name} GB/s | ratio |")
print("|---:|---:|---:|---:|")
for size in sorted(set(c) & set(t)):
    a, b = c[size][col], t[size][col]
    print(f"| {size} | {a:.3f} | {b:.3f} | {a / b:.2f}x |" if b else f"| {size} | {a:.3f} | {b:.3f} | - |")
PY
