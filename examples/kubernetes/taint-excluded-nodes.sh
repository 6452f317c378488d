#!/bin/bash
# Keeps Kubernetes from scheduling the job's pods on nodes cxxrun stepped
# out of a job (a failed health check, exit 243): taints each node an
# --exclude-file names. Run it after (or during) the job, from a host with
# kubectl, on the exclude file the pods write to a shared volume:
#
#   cxxrun ... --exclude-file=/shared/excluded-pods train.py     # in each pod
#   examples/kubernetes/taint-excluded-nodes.sh /shared/excluded-pods [NAMESPACE]
#
# A pod's host name is its pod name, so each line is mapped to the node the
# pod ran on. Remove a taint once the node is fixed:
#   kubectl taint nodes NODE cxxrun.io/unhealthy-
set -euo pipefail

file=${1:?usage: taint-excluded-nodes.sh EXCLUDE_FILE [NAMESPACE]}
namespace=${2:-default}

sort -u "$file" | while read -r pod; do
  [ -n "$pod" ] || continue
  node=$(kubectl -n "$namespace" get pod "$pod" -o jsonpath='{.spec.nodeName}' 2>/dev/null || true)
  if [ -z "$node" ]; then
    echo "taint-excluded-nodes.sh: pod $pod is gone; its node is unknown" >&2
    continue
  fi
  kubectl taint nodes "$node" cxxrun.io/unhealthy=true:NoSchedule --overwrite
  echo "tainted $node (pod $pod stepped out of its job)"
done
