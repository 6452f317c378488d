#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into build-fuzz/ and runs each for a
# bounded time (FUZZ_SECONDS, default 30). Exits non-zero when a target finds
# a crash; its reproducer is left in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found: apt-get install clang" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCXXRUN_FUZZ=ON -DBUILD_TESTING=OFF
fi
cmake --build build-fuzz -j"${JOBS:-2}" --target store_request_fuzz

mkdir -p build-fuzz/corpus/store_request build-fuzz/artifacts
build-fuzz/tests/fuzz/store_request_fuzz -max_total_time="$seconds" -max_len=4096 \
  -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus/store_request
