#!/bin/sh
# Stands in for a peer that could not be built, in the peers' protocol (benches/gpu/peers.rs), so
# its column says why instead of "missing":
#
#   sh no-peer.sh IMPL KINDS REASON PLAN
#
# prints an error line ("not run: REASON") for every workload whose kind starts with one of KINDS
# (comma-separated: what the peer would have run) and an unsupported line for the others. REASON
# holds no quotes or backslashes (it goes into JSON as it is).
impl="$1" kinds="$2" reason="$3" plan="$4"
while read -r name kind _; do
  case "$name" in '' | '#'* | generator) continue ;; esac
  runs=0
  for prefix in $(echo "$kinds" | tr ',' ' '); do
    case "$kind" in "$prefix"*) runs=1 ;; esac
  done
  if [ $runs = 1 ]; then
    printf '{"workload":"%s","impl":"%s","status":"error","note":"not run: %s"}\n' "$name" "$impl" "$reason"
  else
    printf '{"workload":"%s","impl":"%s","status":"unsupported","note":"no %s peer for kind %s"}\n' "$name" "$impl" "$impl" "$kind"
  fi
done < "$plan"
