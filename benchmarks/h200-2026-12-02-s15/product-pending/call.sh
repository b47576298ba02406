#!/usr/bin/env bash
# flce's own backward products (kernels/sm90/product.cu, FLCE_SM90_PRODUCTS=1) after the
# fourteenth session's second tile width (128 × 192 beside 128 × 256, plan::sm90_product_tile_n;
# FLCE_SM90_PRODUCT_TILE_N=192|256 forces one), built and compile-checked on the CPU only (SASS:
# HGMMA.64x192x16, no spills; the forward and G kernels' SASS unchanged). One device call, from
# the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-pending.sh
# - GPU tests with flce's products, each width forced (the small cases' D = 64 / 520 choose 192 by
#   themselves): de-chunks, de-head, long-tail (three accumulator segments), 2 SMs, and Gemma 2
#   sampled (D = 2304: the shape the narrow tile is for); memcheck of three cases at 192;
# - timing, interleaved: cuBLAS's products, flce's (widths chosen), flce's at 256 only
#   (gpu-variants.sh, 2 rounds, the three model shapes);
# - every launch of one Gemma 2 step with cuBLAS's and flce's products (gpu-product-launches.sh).
# Logs in $OUT/logs.tgz (the device tool returns only a few files); the tables last. ~8 minutes.
# The previous version of this call: benchmarks/h200-2026-12-01-s14/product-segments/call.sh.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
for n in 192 256; do
  echo "== tests, tile width $n $(date -u +%T)"
  FLCE_SM90_PRODUCTS=1 FLCE_SM90_PRODUCT_TILE_N=$n timeout "${T_TESTS:-60}" gpu-bundle/gpu-tests --small \
    "bf16 sum (600,520,5000) de-chunks" "de-head" "long-tail" "2 SMs" > $L/gpu-tests-product-$n.log 2>&1
  echo "exit $?" >> $L/gpu-tests-product-$n.log
done
FLCE_SM90_PRODUCTS=1 timeout "${T_SAMPLED:-90}" gpu-bundle/gpu-tests "bf16 gemma2 sampled fused" \
  > $L/gpu-tests-product-gemma2.log 2>&1
echo "exit $?" >> $L/gpu-tests-product-gemma2.log
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 FLCE_SM90_PRODUCT_TILE_N=192 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  gpu-bundle/gpu-tests --small "bf16 plain (3000,64,12000) de-head" "bf16 all (5000,64,3000) long-tail" \
  "bf16 sum (600,520,5000) de-chunks" > $L/memcheck-product.log 2>&1
echo "exit $?" >> $L/memcheck-product.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp
OUT=/tmp/vp timeout 150 bash scripts/gpu-variants.sh 2 "cublas=gpu-bundle/flce" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" "own256=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_TILE_N=256" \
  > $L/variants-product.md 2>&1
cp -r /tmp/vp $L/
echo "== launches gemma2 $(date -u +%T)"
SHAPE=gemma2 OUT=$L timeout 45 bash scripts/gpu-product-launches.sh > $L/launches.log 2>&1
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
grep -h "FAILED\|^gpu:\|^exit" $L/gpu-tests-product-*.log | head -12
grep -h "ERROR SUMMARY\|^exit\|^gpu:" $L/memcheck-product.log
grep -h "^##\|^exit" $L/launches-*.log
tail -n 11 $L/variants-product.md
