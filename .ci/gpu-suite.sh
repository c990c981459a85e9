#!/usr/bin/env bash
# The GPU suite, on the GPU machine (CI has no GPU and does not run it): every packed test and
# example binary plainly (OXICUB_REQUIRE_GPU=1), then the named test binaries under
# compute-sanitizer memcheck, then "binary:filter" pairs under racecheck (docs/testing.md,
# "GPU tests and sanitizers"). Needs .device/ from ../shared/tools/gpu-pack.
#
#   bash .ci/gpu-suite.sh plain "topk_gpu robustness_gpu" "racecheck_gpu:every"
#
# A one-line summary per run goes to $OUT/summary.txt, the logs to $OUT/logs.tgz. MEM_T and
# RACE_T set each sanitizer run's time limit in seconds (default 400).
cd "$(dirname "$0")/.."
export OXICUB_REQUIRE_GPU=1 OXICUB_REQUIRE_NVRTC=1 RUST_BACKTRACE=1
# The kernel compile check compiles every spec here, not CI's covering subset (docs/testing.md,
# "Kernel compile check").
export OXICUB_COMPILE_CHECK=full
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OXICUB_CACHE_DIR=/tmp/oxicub-cache
mkdir -p -m 700 /tmp/oxicub-cache
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
summary=$out/summary.txt
: > "$summary"
run() { # label, timeout, command...
  local label=$1 t=$2; shift 2
  local log=$out/logs/$label.log
  mkdir -p "$(dirname "$log")"
  local start=$(date +%s%N)
  timeout "$t" "$@" > "$log" 2>&1; local rc=$?
  local secs=$(( ($(date +%s%N) - start) / 1000000 ))
  local res=$(grep -E "^test result" "$log" | awk '{p+=$4; f+=$6} END {print p" passed "f" failed"}')
  local san=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | sort | uniq -c | tr '\n' ';')
  printf '%-55s rc=%-3s %7sms %s %s\n' "$label" "$rc" "$secs" "$res" "$san" | tee -a "$summary"
}
if [ "${1:-}" = "plain" ]; then
  for t in .device/bin/test-*; do run "plain/$(basename $t)" 300 "$t" --test-threads=1; done
  for e in .device/bin/example-*; do run "plain/$(basename $e)" 120 "$e"; done
fi
for name in ${2:-}; do
  run "memcheck/$name" ${MEM_T:-400} compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 .device/bin/test-$name --test-threads=1
done
# racecheck: "binary:filter" pairs
for spec in ${3:-}; do
  name=${spec%%:*}; filter=${spec#*:}
  run "racecheck/$name/$filter" ${RACE_T:-400} compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 --print-limit 20 .device/bin/test-$name --test-threads=1 "$filter"
done
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
