#!/usr/bin/env bash
# flce's own products in clusters of 2 (FLCE_SM90_PRODUCT_CLUSTER=2, with FLCE_SM90_PRODUCTS=1):
# a pair of column tiles of one row tile shares A's box (G or Gᵀ, the large operand), each block
# loading half and multicasting it — cuBLAS's product kernels run in 1 × 2 clusters and read ~1.6×
# less from L2 than ours (perf-notes v21). One short device call, from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-cluster.sh
# - GPU tests with clustered products: de-head, de-chunks, long-tail, 2 SMs (D = 64 / 520: an odd
#   column count, so a pair's second tile past the columns); memcheck of two of them;
# - timing, interleaved (gpu-variants.sh 2): own products without and with clusters.
# About 2.5 minutes; logs in $OUT/logs.tgz, the table last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== tests $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 FLCE_SM90_PRODUCT_CLUSTER=2 timeout "${T_TESTS:-50}" gpu-bundle/gpu-tests --small \
  "de-head" "long-tail" "de-chunks" "2 SMs" > $L/gpu-tests-cluster.log 2>&1
echo "exit $?" >> $L/gpu-tests-cluster.log
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 FLCE_SM90_PRODUCT_CLUSTER=2 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 \
  gpu-bundle/gpu-tests --small "bf16 plain (3000,64,12000) de-head" "bf16 all (5000,64,3000) long-tail" \
  > $L/memcheck-cluster.log 2>&1
echo "exit $?" >> $L/memcheck-cluster.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vc
OUT=/tmp/vc timeout 75 bash scripts/gpu-variants.sh 2 "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" \
  "own_cluster=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1,FLCE_SM90_PRODUCT_CLUSTER=2" > $L/variants.md 2>&1
cp -r /tmp/vc $L/
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
echo "tests: $(grep -c '\.\.\. ok' $L/gpu-tests-cluster.log) ok, $(grep -c 'FAILED' $L/gpu-tests-cluster.log) failed; $(grep -h '^gpu:\|^exit' $L/gpu-tests-cluster.log | tr '\n' ' ')"
grep -h "FAILED\|rror" $L/gpu-tests-cluster.log | head -3
grep -h "ERROR SUMMARY\|^exit\|^gpu:" $L/memcheck-cluster.log
tail -n 8 $L/variants.md
