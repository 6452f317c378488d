#!/usr/bin/env bash
# Builds the Debian packages into build/: cxxrun_<version>_<arch>.deb (the
# programs and cxxrun-rdzv's service) and cxxrun-dev_<version>_<arch>.deb (the
# worker library, headers and CMake package). Run scripts/install-deps.sh
# first on a fresh machine. Prints the path of each package.
# They come from the same tree as everything else, build/ (configured by
# scripts/build.sh when it is not yet): the packages install under /usr
# whatever the tree's own prefix, and where the service's files go is decided
# when installing (packaging/CMakeLists.txt), so no second tree is built.
set -euo pipefail
cd "$(dirname "$0")/.."
# No tree yet: the example's (scripts/build.sh --example), which configures it.
[ -f build/CMakeCache.txt ] || scripts/build.sh --example >/dev/null
cmake --build build -j"${JOBS:-2}" --target cxxrun cxxrun-rdzv cxxrunctl cxxrun_worker cxxrun_worker_shared docs
(cd build && cpack -G DEB >/dev/null)
for deb in build/cxxrun*_"$(dpkg --print-architecture)".deb; do
  echo "$PWD/$deb"
done
