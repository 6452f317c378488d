#!/usr/bin/env bash
# Installs every Debian package cxxrun needs to build, test and benchmark;
# with --example, only what building cxxrun and examples/train needs
# (scripts/run-example.sh: a newcomer's first job should not wait for Slurm,
# etcd, clang and torch).
# Idempotent: packages already present are left alone; apt-get update runs first.
set -euo pipefail

# cxxrun, cxxrun-rdzv, the worker library and the examples.
build_packages=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgloo-dev
  libssl-dev
  libnghttp2-dev  # HTTP/2 for the etcd client's gRPC (etcd/grpc_session.h)
  libhwloc-dev  # GPUs, NUMA nodes and caches for --numa-binding (agent/numa/topology.h)
)
# Tests, the fuzzer, benchmarks and packaging.
test_packages=(
  libboost-filesystem1.81-dev catch2
  clang libclang-rt-14-dev
  python3 python3-torch
  python3-pytest  # the cxxrun Python package's tests (tests/python/)
  # Build the wheel with Debian's tools, nothing downloaded, and install it
  # into a venv (pyproject.toml, tests/integration/test_wheel.py).
  python3-setuptools python3-wheel python3-build python3-venv
  python3-yaml  # reads examples/kubernetes/ in tests/integration/test_kubernetes.py
  procps iproute2 util-linux
  elfutils  # eu-stack: a native worker's stack when it hangs (agent/hang/stack_dump.h)
  tmux  # a real terminal for the --tty test (tests/integration/test_tty.py)
  # Real sshd and ssh between network namespaces: cxxrun --hostfile's test
  # (tests/integration/test_hostfile_netns.py) and bench/hostfile_launch.py.
  openssh-server openssh-client
  # bench/rdzv_scale.py --plot draws the recovery phases; munkres stands in
  # for fonttools' "scipy | munkres", whose scipy pulls pythran and with it
  # libboost1.74-dev, which conflicts with libboost1.81-dev.
  python3-matplotlib python3-munkres
  man-db groff-base  # renders the generated man pages (tests/integration/test_docs.py)
  dpkg-dev  # dpkg-shlibdeps, for the Debian package's dependencies (scripts/package.sh)
  # A private two-node Slurm cluster for tests/integration/test_slurm.py. The
  # tests run their own munged and daemons from a temp dir; the system units
  # installed here stay idle: slurmd/slurmctld need /etc/slurm/slurm.conf,
  # which nothing writes, and a system munged on /run/munge is not used.
  slurmctld slurmd slurm-client munge
  # A private three-member etcd cluster for the etcd client's tests
  # (tests/integration/etcd_cluster.py), on ports of its own.
  etcd-server etcd-client
)

case "${1:-}" in
  --example) packages=("${build_packages[@]}") ;;
  "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (known: --example)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"

# Debian's etcd-server starts a system etcd on 2379/2380 as it installs. The
# tests run their own members and never want it: left running it would hold
# the well-known ports and take any traffic a misconfigured test or client
# sent there, with data that outlives the test. Stop it and keep it off.
if [[ " ${missing[*]} " == *" etcd-server "* ]]; then
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    "${sudo_cmd[@]}" systemctl disable --now etcd >/dev/null 2>&1 || true
  else
    # No systemd: the package's init script started it; stop it the same way,
    # and make sure it does not come back with the next boot.
    "${sudo_cmd[@]}" service etcd stop >/dev/null 2>&1 || true
    command -v update-rc.d >/dev/null && "${sudo_cmd[@]}" update-rc.d etcd disable >/dev/null 2>&1 || true
  fi
fi
