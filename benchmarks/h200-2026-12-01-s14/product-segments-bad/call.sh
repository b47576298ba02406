#!/usr/bin/env bash
# s14 call 3: dE's product over its accumulator segments in one launch (own products), and the
# norm tiles after the frozen-norm fix. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
echo "== tests $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 110 gpu-bundle/gpu-tests "de-head" "long-tail" "bf16 sum (600,520,5000) de-chunks" \
  > "$OUT/gpu-tests-product-segments.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-product-segments.log"
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (3000,64,12000) de-head" "bf16 all (5000,64,3000) long-tail" > "$OUT/memcheck-product.log" 2>&1
echo "exit $?" >> "$OUT/memcheck-product.log"
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp
OUT=/tmp/vp timeout 100 bash scripts/gpu-variants.sh 2 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants-product.md" 2>&1
tar czf "$OUT/variants-product-logs.tgz" -C /tmp vp
echo "== launches gemma2 $(date -u +%T)"
SHAPE=gemma2 OUT="$OUT" timeout 60 bash scripts/gpu-product-launches.sh > "$OUT/launches.log" 2>&1
echo "== memory $(date -u +%T)"
OUT="$OUT" LONG_MODES=offload_tiled_norms T_NORMS=140 T_LONG=150 timeout 300 bash scripts/gpu-memory-pending.sh > "$OUT/memory.log" 2>&1
echo "== done $(date -u +%T)"
grep -h "FAILED\|^gpu:\|^exit" "$OUT"/gpu-tests-product-segments.log | head
grep -h "ERROR SUMMARY\|^exit" "$OUT/memcheck-product.log"
cat "$OUT/launches.log"
tail -n 8 "$OUT/variants-product.md"
tail -n 12 "$OUT/memory.log" | cut -c1-250
