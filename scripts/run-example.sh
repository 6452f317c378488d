#!/usr/bin/env bash
# Installs what is missing, builds, and runs a real multi-process job:
# data-parallel training (examples/train) on 4 workers under cxxrun
# --standalone, gradients allreduced over Gloo.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the example needs: scripts/test.sh installs and builds the rest.
scripts/install-deps.sh --example
scripts/build.sh --example
exec build/bin/cxxrun --standalone --nproc-per-node=4 build/examples/train --steps 300 \
  --checkpoint-dir "${TMPDIR:-/tmp}/cxxrun-train" "$@"
