#!/usr/bin/env bash
# s14 call 4: dE's product over its accumulator segments in one launch (own products), after
# the fix of dC's split rows. Logs in $OUT/logs.tgz (the device tool returns few files).
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== tests $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 100 gpu-bundle/gpu-tests "de-head" "long-tail" "bf16 sum (600,520,5000) de-chunks" \
  > $L/gpu-tests-product-segments.log 2>&1
echo "exit $?" >> $L/gpu-tests-product-segments.log
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (3000,64,12000) de-head" "bf16 all (5000,64,3000) long-tail" "bf16 sum (600,520,5000) de-chunks" \
  > $L/memcheck-product.log 2>&1
echo "exit $?" >> $L/memcheck-product.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp
OUT=/tmp/vp timeout 100 bash scripts/gpu-variants.sh 2 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > $L/variants-product.md 2>&1
cp -r /tmp/vp $L/
echo "== launches gemma2 $(date -u +%T)"
SHAPE=gemma2 OUT=$L timeout 60 bash scripts/gpu-product-launches.sh > $L/launches.log 2>&1
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
grep -h "FAILED\|^gpu:\|^exit" $L/gpu-tests-product-segments.log | head
grep -h "ERROR SUMMARY\|^exit\|^gpu:" $L/memcheck-product.log
grep -h "^##\|^exit" $L/launches-*.log
tail -n 8 $L/variants-product.md
