#!/usr/bin/env bash
# Packs what scripts/gpu-checks.sh needs on the GPU machine into .gpu/ (git
# ignores it): the binaries of build/ without debug info, in the same layout,
# and the shared libraries they take from this machine's Debian packages
# (the GPU machine has its own libc, libstdc++, CUDA driver and NCCL). The
# binaries built on Debian 12 run there unchanged (its glibc is newer); NCCL
# is not copied (it is large), so gpu-checks.sh uses the GPU machine's own,
# which must match the nccl.h the build used. Run scripts/build.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu
mkdir -p .gpu/lib
binaries=(bin/cxxrun bin/cxxrun-rdzv examples/train examples/sum_ranks examples/allreduce_perf examples/pi
          examples/heartbeat_demo tests/unit_tests tests/collectives_check tests/c_api_check
          tests/file_timer_probe tests/store_client_probe bench/rdzv_load bench/store_load)
for b in "${binaries[@]}"; do
  [ -x "build/$b" ] || { echo "gpu-pack: build/$b is missing (run scripts/build.sh)" >&2; exit 1; }
  mkdir -p ".gpu/build/$(dirname "$b")"
  strip --strip-debug -o ".gpu/build/$b" "build/$b"
done
# What the binaries link, less the base system and what the GPU machine has
# in its own versions.
for b in "${binaries[@]}"; do ldd "build/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -Ev '^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libnccl|libcuda|libcudart)\.so' |
  while read -r name path; do cp -L "$path" ".gpu/lib/$name"; done
du -sh .gpu
