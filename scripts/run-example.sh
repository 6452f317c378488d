#!/usr/bin/env bash
# Installs what is missing, builds, and runs a real multi-process job:
# 4 workers of examples/pi under cxxrun --standalone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/bin/cxxrun --standalone --nproc-per-node=4 build/examples/pi "$@"
