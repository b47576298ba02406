#!/usr/bin/env bash
# s19 call 6: the large-N sm90 forward grid (plan::SM90_LARGE_N_TOKENS: up to 16 splits, 40 MB of
# L2 past 16k tokens) at 128k tokens against the grid before it (flce-base, 5106265), then the
# Llama 3 128k sampled test under the new grid.
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
OUT=/tmp/v128k SHAPES=131072,4096,128256 BENCH_ARGS="--step-budget-mb 0 --iters 3" timeout 150 bash scripts/gpu-variants.sh 2 \
  "base=gpu-bundle/flce-base" "large_n=gpu-bundle/flce" > $OUT/variants-128k.md 2>&1
echo "timing rc=$?"; tar czf $OUT/v128k.tgz -C /tmp v128k; grep -v "^|---" $OUT/variants-128k.md | tail -3 | cut -d'|' -f2-6,10-11
timeout 130 gpu-bundle/gpu-tests "llama3-128k sampled fused" > $OUT/tests-128k.log 2>&1; echo "test rc=$?"; grep -E "^test|passed" $OUT/tests-128k.log | tail -3
