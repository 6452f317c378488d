#!/usr/bin/env bash
# The long chaos run: a few hundred faults of every kind (tests/chaos/chaos.py),
# each checked for orphans, its exit code and root cause, and its time bound.
# Prints one line per fault and a summary (faults, orphans, wrong statuses,
# hangs). Usage: bench/chaos.sh [FAULTS (300)] [SEED (1)]   (scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/chaos/chaos.py --faults "${1:-300}" --seed "${2:-1}" --cxxrun build/bin/cxxrun
