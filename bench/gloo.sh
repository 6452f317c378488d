#!/usr/bin/env bash
# Gloo allreduce, 4 ranks, 4 KiB..64 MiB: cxxrun's runtime (examples/allreduce_perf)
# against torch.distributed gloo (Debian torch 1.13), both launched by cxxrun,
# alternating in one session. Prints busbw per size and the ratio.
# Usage: bench/gloo.sh [build-dir] [rounds]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
rounds=${2:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  timeout 600 "$build/bin/cxxrun" --standalone --nproc-per-node=4 "$build/examples/allreduce_perf" \
    --min-bytes 4096 --max-bytes 67108864 --iters 20 --warmup 5 2>/dev/null |
    sed -n 's/^\[default0\]://p' | awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $1, $7}' >> "$out/cxxrun"
  PYTHON_EXEC=/usr/bin/python3 timeout 600 "$build/bin/cxxrun" --standalone --nproc-per-node=4 \
    bench/torch_allreduce_perf.py 4096 67108864 20 5 2>/dev/null |
    sed -n 's/^\[default0\]:\([0-9]*\) [0-9.]* [0-9.]* \([0-9.]*\)$/\1 \2/p' >> "$out/torch"
done
/usr/bin/python3 - "$out/cxxrun" "$out/torch" <<'PY'
import statistics, sys
def load(path):
    by = {}
    for line in open(path):
        size, bw = line.split()
        by.setdefault(int(size), []).append(float(bw))
    return {k: statistics.median(v) for k, v in by.items()}
c, t = load(sys.argv[1]), load(sys.argv[2])
print("| size | cxxrun busbw GB/s | torch gloo busbw GB/s | ratio |")
print("|---:|---:|---:|---:|")
for size in sorted(set(c) & set(t)):
    print(f"| {size} | {c[size]:.3f} | {t[size]:.3f} | {c[size] / t[size]:.2f}x |")
PY
