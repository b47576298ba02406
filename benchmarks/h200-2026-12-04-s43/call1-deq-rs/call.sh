#!/usr/bin/env bash
# s43 call 1: the de-q / own-de GPU tests, memchecks (de-q, and s42's prs=1 left over), a first timing
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
FLCE_GPU_TEST_MODES=FusedTiles timeout 260 ./gpu-bundle/gpu-tests --small "(257,520,300)" "(1024,64,8000)" "(1,64,1000)" \
  "(129,200,5003)" "(300,128,2049)" shift de-chunks chunked-budget > "$OUT/tests.log" 2>&1
echo "tests rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "FAIL|^gpu:" "$OUT/tests.log" | tail -8
T0=$(date +%s)
FLCE_GPU_TEST_MODES=FusedTiles timeout 100 compute-sanitizer --tool memcheck ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" \
  > "$OUT/memcheck-deq.log" 2>&1
echo "memcheck de-q rc $? ($(( $(date +%s) - T0 )) s)"; tail -n 3 "$OUT/memcheck-deq.log"
T0=$(date +%s)
FLCE_SM90_PRODUCTS=1 FLCE_SM90_MAINLOOP=prs=1 FLCE_GPU_TEST_MODES=FusedTiles timeout 80 compute-sanitizer --tool memcheck \
  ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" > "$OUT/memcheck-prs.log" 2>&1
echo "memcheck prs rc $? ($(( $(date +%s) - T0 )) s)"; tail -n 3 "$OUT/memcheck-prs.log"
left=$(( 560 - SECONDS ))
echo "timing with ${left} s left"
OUT="$OUT/ab" BENCH_ARGS="--step-budget-mb 8192" timeout $left bash scripts/gpu-variants.sh 1 \
  "cublas=gpu-bundle/flce:FLCE_STEP_PRODUCTS=cublas" "own=gpu-bundle/flce:FLCE_STEP_PRODUCTS=own-de" \
  "deq=gpu-bundle/flce:FLCE_STEP_PRODUCTS=de-q" > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; tail -n 20 "$OUT/ab.txt"
cd "$OUT" && tar czf ab-logs.tgz ab && rm -rf ab
