#!/usr/bin/env bash
# cxxrun's GPU checks, run by hand on a machine with a GPU and a CUDA torch
# (CI has none; the tests there skip these). Each step's output goes to
# OUTDIR/<step>.log and one "step rc" line to OUTDIR/summary.
#
#   here:  scripts/build.sh && scripts/gpu-pack.sh      (binaries + libs into .gpu/)
#   there: scripts/gpu-checks.sh OUTDIR [step...]        (all steps by default)
#
# TORCH_PYTHON: the python with torch and CUDA (default /opt/torch/.venv/bin/python3).
# NCCL_LIB: the folder with the libnccl.so.2 matching nccl.h at build time
#   (default: the one inside that torch's venv).
set -uo pipefail
cd "$(dirname "$0")/.."
outdir=${1:?usage: scripts/gpu-checks.sh OUTDIR [step...]}
shift
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
TORCH_PYTHON=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
NCCL_LIB=${NCCL_LIB:-$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib 2>/dev/null | head -1)}
export TORCH_PYTHON
export LD_LIBRARY_PATH="$PWD/.gpu/lib:$NCCL_LIB:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -x build/bin/cxxrun ] && [ -d .gpu/build ]; then cp -a .gpu/build build; fi
B=$PWD/build
cxxrun() { "$B/bin/cxxrun" "$@"; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  # Through bash, so that the shell functions below (exported) can be timed out too.
  timeout -k 5 "$limit" bash -c '"$@"' step "$@" >"$outdir/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - start))s" | tee -a "$outdir/summary"
}

machine() {
  nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "/proc/driver/nvidia/gpus: $(ls /proc/driver/nvidia/gpus 2>&1 | tr '\n' ' ')"
  nproc; uname -r; ldd --version | head -1
  "$TORCH_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  ldd "$B/examples/train" | grep -E "nccl|cudart|gloo|not found"
}

train_runs() {  # the same job on gloo (1 and 4 ranks) and on nccl (one rank per GPU)
  set -e
  cxxrun --standalone --nproc-per-node=1 "$B/examples/train" --backend gloo --checkpoint-dir "$scratch/g1"
  cxxrun --standalone --nproc-per-node=4 "$B/examples/train" --backend gloo --checkpoint-dir "$scratch/g4"
  cxxrun --standalone --nproc-per-node=gpu "$B/examples/train" --backend nccl --checkpoint-dir "$scratch/n1"
}

train_nccl_restart() {  # rank 0 fails at step 30 of attempt 0; attempt 1 resumes from the checkpoint
  cxxrun --standalone --nproc-per-node=gpu --max-restarts=1 "$B/examples/train" --backend nccl \
    --checkpoint-dir "$scratch/restart" --checkpoint-every 10 --fail-at-step 30 --fail-rank 0
}

integration_torch() {  # the torch tests with this machine's torch (2.x: modern store protocol)
  cd tests/integration &&
    CXXRUN="$B/bin/cxxrun" CXXRUN_EXAMPLES="$B/examples" CXXRUN_TORCH_PYTHON="$TORCH_PYTHON" \
      python3 -m unittest -v test_torch test_store_interop test_hang.FileTimer
}

integration_torch_forkserver() {  # the same, every Python worker forked from the forkserver
  cd tests/integration &&
    CXXRUN="$B/bin/cxxrun" CXXRUN_EXAMPLES="$B/examples" CXXRUN_TORCH_PYTHON="$TORCH_PYTHON" \
      CXXRUN_TEST_START_METHOD=forkserver python3 -m unittest -v test_torch
}

integration_torch_inprocess() {  # tests that import torch themselves
  cd tests/integration &&
    CXXRUN="$B/bin/cxxrun" STORE_CLIENT_PROBE="$B/tests/store_client_probe" \
      FILE_TIMER_PROBE="$B/tests/file_timer_probe" "$TORCH_PYTHON" -m unittest -v test_client_interop \
      test_file_timer_protocol
}

export B scratch
export -f cxxrun machine train_runs train_nccl_restart integration_torch integration_torch_forkserver \
  integration_torch_inprocess

all=(machine unit_nccl train_runs train_nccl_restart sum_ranks_nccl allreduce_perf_nccl integration_torch
     integration_torch_forkserver integration_torch_inprocess bench_nccl bench_torch_jobs bench_store unit_all)
for s in "${@:-${all[@]}}"; do
  case "$s" in
    machine) step machine 120 machine ;;
    unit_nccl) step unit_nccl 300 "$B/tests/unit_tests" "NCCL*" ;;
    unit_all) step unit_all 300 "$B/tests/unit_tests" ;;
    bench_store) step bench_store 300 env THREADS=4 bench/store.sh "$B" ;;
    train_runs) step train_runs 300 train_runs ;;
    train_nccl_restart) step train_nccl_restart 300 train_nccl_restart ;;
    sum_ranks_nccl) step sum_ranks_nccl 120 cxxrun --standalone --nproc-per-node=gpu "$B/examples/sum_ranks" --backend nccl ;;
    allreduce_perf_nccl) step allreduce_perf_nccl 300 cxxrun --standalone --nproc-per-node=gpu \
                           "$B/examples/allreduce_perf" --backend nccl --max-bytes 268435456 ;;
    integration_torch) step integration_torch 500 integration_torch ;;
    integration_torch_forkserver) step integration_torch_forkserver 500 integration_torch_forkserver ;;
    integration_torch_inprocess) step integration_torch_inprocess 300 integration_torch_inprocess ;;
    bench_nccl) step bench_nccl 500 bench/allreduce.sh nccl "$B" 3 ;;
    bench_torch_jobs) step bench_torch_jobs 500 bench/torch_jobs.py --python "$TORCH_PYTHON" --build "$B" --runs 3 ;;
    *) echo "gpu-checks: unknown step '$s' (steps: ${all[*]})" >&2; exit 2 ;;
  esac
done
