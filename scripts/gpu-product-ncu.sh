#!/usr/bin/env bash
# Where flce's own products (FLCE_SM90_PRODUCTS=1) lose their last 2–4% to cuBLAS's, one device
# call from the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-ncu.sh
# - timing, interleaved (gpu-variants.sh, 2 rounds, three shapes): cuBLAS's products, flce's
#   (width per launch from plan::sm90_product_tile_n), flce's at 192 everywhere (TIMING=0: none);
# - ncu of Gemma 2's large chunk (the step's 3rd and 4th product launches: dC then dE of the
#   51,200-row chunk, benchmarks/h200-2026-12-02-s15/product-pending/launches-own.log) beside
#   cuBLAS's same two products (its nvjet 192x192 kernels, by name), with the sections of
#   scripts/ncu-sm90.sh; SOURCE=1 adds the dC launch's warp stalls by SASS line (CSV); CLUSTER=2
#   profiles the own launches in clusters of 2 (with the Occupancy section).
# About 5 minutes; logs in $OUT/logs.tgz, the headlines last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp
[ "${TIMING:-1}" = 1 ] && OUT=/tmp/vp timeout 150 bash scripts/gpu-variants.sh 2 "cublas=gpu-bundle/flce" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" "own192=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_TILE_N=192" \
  > $L/variants-product.md 2>&1
cp -r /tmp/vp $L/
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section LaunchStats)
bench=(gpu-bundle/flce bench --shapes gemma2 --forward auto --backward auto --step-budget-mb 0)
echo "== ncu own $(date -u +%T)"
# CLUSTER=2: the own launches in clusters of 2 (FLCE_SM90_PRODUCT_CLUSTER), with the Occupancy
# section's max active clusters — why pairs run 1.2–1.3× slower (perf-notes v21)
[ "${CLUSTER:-1}" = 2 ] && { export FLCE_SM90_PRODUCT_CLUSTER=2; sections+=(--section Occupancy); }
FLCE_SM90_PRODUCTS=1 timeout 150 ncu --clock-control none -k regex:flce_sm90_product --launch-skip 2 -c 2 \
  "${sections[@]}" "${bench[@]}" > $L/ncu-own-gemma2.log 2>&1
echo "exit $?" >> $L/ncu-own-gemma2.log
echo "== ncu cublas $(date -u +%T)"
# (by name: `flce bench` times its reference logits GEMM, nvjet too, before the step)
timeout 150 ncu --clock-control none -k regex:nvjet_sm90_tst_192x192 --launch-skip 1 -c 1 \
  "${sections[@]}" "${bench[@]}" > $L/ncu-cublas-gemma2.log 2>&1
echo "exit $?" >> $L/ncu-cublas-gemma2.log
timeout 150 ncu --clock-control none -k regex:nvjet_sm90_tss_192x192.*badd -c 1 \
  "${sections[@]}" "${bench[@]}" >> $L/ncu-cublas-gemma2.log 2>&1
echo "exit $?" >> $L/ncu-cublas-gemma2.log
if [ "${SOURCE:-0}" = 1 ]; then
  echo "== ncu own, stalls by source line $(date -u +%T)"
  FLCE_SM90_PRODUCTS=1 timeout 150 ncu --clock-control none -k regex:flce_sm90_product --launch-skip 2 -c 1 \
    --section WarpStateStats --section SourceCounters --page source --csv --print-source sass \
    "${bench[@]}" > $L/ncu-own-gemma2-source.csv 2>&1
  echo "exit $?" >> $L/ncu-own-gemma2-source.csv
fi
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in $L/ncu-own-gemma2.log $L/ncu-cublas-gemma2.log; do
  echo "== $f"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Issued Warp Per Scheduler|L2 Hit Rate|DRAM Throughput|Registers Per|^exit" "$f" | head -20
done
tail -n 11 $L/variants-product.md
