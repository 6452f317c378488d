#!/usr/bin/env bash
# Builds the Debian packages into build/: cxxrun_<version>_<arch>.deb (the
# programs and cxxrun-rdzv's service) and cxxrun-dev_<version>_<arch>.deb (the
# worker library, headers and CMake package). Run scripts/install-deps.sh
# first on a fresh machine. Prints the path of each package.
# They are built in a directory of their own, build-package/: the packages
# install under /usr, and their service files under /etc and /lib, which the
# development build in build/ (for cmake --install --prefix anywhere) must not.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-package
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$out" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build "$out" -j"${JOBS:-2}" --target cxxrun cxxrun-rdzv cxxrunctl cxxrun_worker cxxrun_worker_shared docs
(cd "$out" && cpack -G DEB >/dev/null)
mkdir -p build
for deb in "$out"/cxxrun*_"$(dpkg --print-architecture)".deb; do
  cp "$deb" build/
  echo "$PWD/build/$(basename "$deb")"
done
