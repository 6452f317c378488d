#!/usr/bin/env bash
# Installs what is missing, builds, packages, and runs every test: the store request
# parser under libFuzzer briefly (garbage on the store port must never crash
# the server), then every unit and process-level test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# The Debian packages, for tests/integration/test_package.py to install.
scripts/package.sh
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" scripts/fuzz.sh 2>&1 | tail -n 15
cd build
ctest --output-on-failure -j"${JOBS:-2}" --timeout 300
