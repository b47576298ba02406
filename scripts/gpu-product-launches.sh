#!/usr/bin/env bash
# Every kernel launch of one Llama 3 forward+backward (8192 tokens), cuBLAS's products against
# flce's own (FLCE_SM90_PRODUCTS=1: kernels/sm90/product.cu, raster-grouped and persistent):
# name, grid and µs per launch (scripts/profile_kernels.py --launches), so that the launches
# where flce's products lose to cuBLAS's can be named — the large-chunk launches already run at
# cuBLAS's rate (benchmarks/h200-2026-12-01-s13/product-grouped/). One device call, from the
# repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-launches.sh
# About 1 minute; SHAPE=gemma2 / qwen25 for the other shapes.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
for v in cublas own; do
  env $([ $v = own ] && echo FLCE_SM90_PRODUCTS=1) timeout 60 python3 scripts/profile_kernels.py \
    --shape "${SHAPE:-llama3}" --configs auto/auto/min --top 6 --launches > "$OUT/launches-$v.log" 2>&1
  echo "exit $?" >> "$OUT/launches-$v.log"
done
for v in cublas own; do echo "== $v"; grep "^##\|^exit" "$OUT/launches-$v.log"; done
