#!/usr/bin/env bash
# Where flce's own products (FLCE_SM90_PRODUCTS=1) lose their last 2–4% to cuBLAS's, one device
# call from the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-ncu.sh
# - timing, interleaved (gpu-variants.sh, 2 rounds, three shapes): cuBLAS's products, flce's
#   (width per launch from plan::sm90_product_tile_n), flce's at 192 everywhere;
# - ncu of Gemma 2's large chunk (the step's 3rd and 4th product launches: dC then dE of the
#   51,200-row chunk, benchmarks/h200-2026-12-02-s15/product-pending/launches-own.log) beside
#   cuBLAS's same two products (its 4th and 5th nvjet launches), with the sections of
#   scripts/ncu-sm90.sh. About 5 minutes; logs in $OUT/logs.tgz, the headlines last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp
OUT=/tmp/vp timeout 150 bash scripts/gpu-variants.sh 2 "cublas=gpu-bundle/flce" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" "own192=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_TILE_N=192" \
  > $L/variants-product.md 2>&1
cp -r /tmp/vp $L/
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section LaunchStats)
bench=(gpu-bundle/flce bench --shapes gemma2 --forward auto --backward auto --step-budget-mb 0)
echo "== ncu own $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 150 ncu --clock-control none -k regex:flce_sm90_product --launch-skip 2 -c 2 \
  "${sections[@]}" "${bench[@]}" > $L/ncu-own-gemma2.log 2>&1
echo "exit $?" >> $L/ncu-own-gemma2.log
echo "== ncu cublas $(date -u +%T)"
timeout 150 ncu --clock-control none -k regex:nvjet --launch-skip 3 -c 2 \
  "${sections[@]}" "${bench[@]}" > $L/ncu-cublas-gemma2.log 2>&1
echo "exit $?" >> $L/ncu-cublas-gemma2.log
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in $L/ncu-own-gemma2.log $L/ncu-cublas-gemma2.log; do
  echo "== $f"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Issued Warp Per Scheduler|L2 Hit Rate|DRAM Throughput|Registers Per|^exit" "$f" | head -20
done
tail -n 11 $L/variants-product.md
