#!/usr/bin/env bash
# One command: compile bench/stamp.c into a scratch dir, then run the launch,
# restart and peak-RSS benchmarks for cxxrun and torchrun side by side and
# print a markdown table.  Extra arguments go to bench/bench.py, e.g.
#   bench/run.sh --runs 20 --torchrun-runs 3
#   bench/run.sh --skip-cxxrun            # torchrun only
#   bench/run.sh --only launch --only rss
#   CXXRUN=/path/to/cxxrun bench/run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
PY=/usr/bin/python3            # Debian's python3 with python3-torch 1.13 (not pyenv's)
CC="${CC:-cc}"

work="$(mktemp -d "${TMPDIR:-/tmp}/cxxrun-bench-bin.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$CC" -O2 -Wall -Wextra -o "$work/stamp" "$here/stamp.c"

# The whole run is bounded too (each subprocess also has --timeout, default 60 s).
exec_timeout="${BENCH_TIMEOUT:-1200}"
timeout --kill-after=10 "$exec_timeout" \
  "$PY" "$here/bench.py" --stamp "$work/stamp" \
  --cxxrun "${CXXRUN:-$root/build/bin/cxxrun}" "$@"
