#!/usr/bin/env bash
# product kernel in raster groups, persistent: tests, memcheck, timing against the row order and cuBLAS
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
echo "== tests $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 130 gpu-bundle/gpu-tests --small bf16 "2 SMs" > "$OUT/gpu-tests-product.log" 2>&1; echo "exit $?" >> "$OUT/gpu-tests-product.log"
FLCE_SM90_PRODUCTS=1 timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 all (3000,64,4000)" "bf16 all (257,520,300)" > "$OUT/memcheck-product.log" 2>&1; echo "exit $?" >> "$OUT/memcheck-product.log"
echo "== timing $(date -u +%T)"
mkdir -p /tmp/v /tmp/v32
OUT=/tmp/v timeout 170 bash scripts/gpu-variants.sh 2 "old=gpu-bundle/old/flce" "new=gpu-bundle/flce" \
  "own-rows=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_ORDER=rows" \
  "own-tiles=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_ORDER=grouped-tiles" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants.md" 2>&1
OUT=/tmp/v32 SHAPES=32768,4096,128256 timeout 80 bash scripts/gpu-variants.sh 1 "new=gpu-bundle/flce" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" "own-tiles=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_ORDER=grouped-tiles" > "$OUT/variants-32k.md" 2>&1
tar czf "$OUT/variants-logs.tgz" -C /tmp v v32
echo "== ncu $(date -u +%T)"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats)
FLCE_SM90_PRODUCTS=1 timeout 60 ncu --clock-control none -k regex:flce_sm90_product -c 3 "${sections[@]}" gpu-bundle/flce bench --shapes llama3 --step-budget-mb 0 --iters 1 > "$OUT/ncu-product.log" 2>&1
echo "== done $(date -u +%T)"
grep -h "FAILED\|^gpu:\|^exit" "$OUT/gpu-tests-product.log" | head; grep -c "\.\.\. ok" "$OUT/gpu-tests-product.log"
grep -h "ERROR SUMMARY\|^exit" "$OUT/memcheck-product.log"
grep -E "^  flce|Duration|SM Frequency|DRAM Throughput|L2 Hit Rate" "$OUT/ncu-product.log" | cut -c1-110
tail -n 17 "$OUT/variants.md"; tail -n 4 "$OUT/variants-32k.md"
