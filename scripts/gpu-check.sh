#!/usr/bin/env bash
# The whole GPU check, run on the GPU machine from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle). Logs go to $OUT (or ./gpu-logs); the summary
# table is printed last.
#   bash gpu-bundle/scripts/gpu-check.sh [--no-sanitizer] [--no-bench]
set -uo pipefail
B=gpu-bundle
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-/tmp/flce-kernels}
sanitizer=1; bench=1
for a in "$@"; do
  case $a in --no-sanitizer) sanitizer=0 ;; --no-bench) bench=0 ;; esac
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()

echo "== GPU tests"
$B/gpu-tests 2>&1 | tee "$OUT/gpu-tests.log"
summary+=("gpu tests: $(tail -n 1 "$OUT/gpu-tests.log")")

if [ $sanitizer = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (small cases)"
    compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "(255,507,123)" > "$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    tail -n 3 "$OUT/sanitizer-$tool.log"
    summary+=("compute-sanitizer $tool: exit $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -n 1)")
  done
fi

if [ $bench = 1 ] && [ -x $B/flce ]; then
  echo "== flce bench"
  $B/flce bench 2>&1 | tee "$OUT/bench.log"
  summary+=("bench: see $OUT/bench.log")
fi

echo
echo "== summary"
for s in "${summary[@]}"; do echo "  $s"; done
