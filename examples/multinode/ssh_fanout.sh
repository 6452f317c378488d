#!/bin/bash
# One cxxrun agent per host over ssh; the first host is the rendezvous endpoint.
#
#   examples/multinode/ssh_fanout.sh node1,node2 --nproc-per-node=8 /shared/train.py --epochs 3
#
# Every host needs cxxrun on PATH, the program at the same path, and ssh
# without a password prompt. Environment: RDZV_PORT (default 29400), RUN_ID
# (default: fresh per run), RDZV_HOST (default: the first host's address as
# its ssh server saw the connection; set it when the hosts reach each other
# by another network), SSH (default ssh).
set -euo pipefail

if [ $# -lt 2 ] || [[ $1 == -* ]]; then
  echo "usage: $0 HOST[,HOST...] [CXXRUN_OPTIONS...] PROGRAM [ARGS...]" >&2
  exit 2
fi
IFS=, read -r -a hosts <<< "$1"
shift
ssh_cmd=${SSH:-ssh}

# The address the first host was reached by, not its name: a name from
# ~/.ssh/config or a short name may mean nothing to the other hosts.
rdzv_host=${RDZV_HOST:-$($ssh_cmd -o BatchMode=yes "${hosts[0]}" 'set -- $SSH_CONNECTION; echo $3')}
[[ $rdzv_host == *:* ]] && rdzv_host="[$rdzv_host]"  # IPv6
run_id=${RUN_ID:-fanout-$(date +%s)-$$}

# ssh hands the far side one string: quote each argument for its shell.
args=$(printf ' %q' --nnodes="${#hosts[@]}" --rdzv-backend=c10d \
  --rdzv-endpoint="$rdzv_host:${RDZV_PORT:-29400}" --rdzv-id="$run_id" "$@")

pids=()
# Ctrl-C or a kill stops every ssh; -tt gives each agent a terminal, whose
# hangup then stops the agent and its workers on that host.
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
for host in "${hosts[@]}"; do
  $ssh_cmd -tt -o BatchMode=yes "$host" "cxxrun$args" < /dev/null &
  pids+=($!)
done

# The first failure's exit code, after every agent has ended.
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || { status=$?; [ $rc -ne 0 ] || rc=$status; }
done
exit $rc
