#!/usr/bin/env bash
# Unpacks a newer etcd server than Debian 12's (3.4) into a directory of its
# own, for the benchmarks only: bench/etcd.py --etcd-bin DIR/usr/bin. Nothing
# is installed, and the tests keep Debian 12's etcd.
#
# Why: etcd 3.4 copies its whole write buffer on every read transaction (each
# Range, and each Txn's compare), and at thousands of agents that copy is
# a third of every member's CPU (bench/RESULTS.md, issue 45); 3.5 shares it.
# Large clusters run 3.5, and Debian 13 (trixie) ships it.
#
#   bench/fetch-etcd.sh [DIR]      (default /opt/etcd-trixie)
set -euo pipefail
dir=${1:-/opt/etcd-trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
curl -fsS -m 120 -o "$scratch/Packages.xz" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
# The index's stanza for etcd-server: its file in the pool and the file's SHA256.
read -r file sum < <(xz -dc "$scratch/Packages.xz" | awk '
  /^Package: / { p = ($2 == "etcd-server") }
  p && /^Filename: / { f = $2 }
  p && /^SHA256: / { s = $2 }
  /^$/ && p && f { print f, s; exit }')
if [[ -z "${file:-}" ]]; then
  echo "fetch-etcd: no etcd-server in $mirror's trixie index" >&2
  exit 1
fi
curl -fsS -m 300 -o "$scratch/etcd.deb" "$mirror/$file"
echo "$sum  $scratch/etcd.deb" | sha256sum -c --quiet -
mkdir -p "$dir"
dpkg-deb -x "$scratch/etcd.deb" "$dir"
"$dir/usr/bin/etcd" --version | head -1
echo "bench/etcd.py --etcd-bin $dir/usr/bin"
