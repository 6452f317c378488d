#!/usr/bin/env bash
# Configures and builds cxxrun into build/ (-j2: the machines have 2 cores).
#   scripts/build.sh             everything, tests included
#   scripts/build.sh --example   cxxrun and examples/train only, no tests
#                                (scripts/run-example.sh); a later full build
#                                turns the tests back on in the same tree
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
targets=()
testing=ON
build_type=RelWithDebInfo
case "${1:-}" in
  --example) targets=(--target cxxrun train); testing=OFF; build_type=Release ;;
  "") ;;
  *) echo "build: unknown argument '$1' (known: --example)" >&2; exit 2 ;;
esac
# A unity build (CMake's batches of 8 sources per translation unit) compiles
# each library's Asio, Beast and JSON templates once per batch instead of once
# per file: the first build takes about half the CPU time (bench/RESULTS.md,
# "The first build and the test command"). A tree of your own can leave it
# off (-DCMAKE_UNITY_BUILD=OFF) for quicker rebuilds of one file.
# RelWithDebInfo's debug info is -g1: line tables and function names, what a
# backtrace, eu-stack and perf show, without every variable's location (a
# third of the compile time; the packages strip it anyway). Configure a tree
# of your own as Debug to step through it in gdb.
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" -DBUILD_TESTING="$testing" \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
elif [ "$testing" = ON ] && grep -q '^BUILD_TESTING:BOOL=OFF' build/CMakeCache.txt; then
  # The tree was first built for the example alone.
  cmake -S . -B build -DBUILD_TESTING=ON
fi
cmake --build build -j"${JOBS:-2}" "${targets[@]}"
