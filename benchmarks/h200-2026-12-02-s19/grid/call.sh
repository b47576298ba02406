#!/usr/bin/env bash
# s19 call 5 (at 5106265): the sm90 forward's grid with up to 16 vocabulary splits (flce-s16 /
# gpu-tests-s16: plan/forward.rs cap by_memory.max(16)) and a 40 MB L2 budget against today's,
# model shapes and 16k-65k tokens; then that plan's GPU tests (sampled large shapes, small cases).
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
i=0
for s in gemma2,llama3,qwen25 16384,4096,128256 32768,4096,128256 65536,4096,128256; do
  i=$((i+1))
  OUT=/tmp/vgrid/$i SHAPES=$s BENCH_ARGS="--step-budget-mb 0 --iters 5" timeout 110 bash scripts/gpu-variants.sh 2 \
    "base=gpu-bundle/flce" "s16l40=gpu-bundle/flce-s16:FLCE_SM90_L2_MB=40" > $OUT/variants-grid-$i.md 2>&1
  echo "grid $s rc=$?"
done
tar czf $OUT/vgrid.tgz -C /tmp vgrid
cat $OUT/variants-grid-*.md | grep -v "^|---" | awk 'NR==1 || !/^\| shape/' | cut -d'|' -f2-6,10-11
export FLCE_SM90_L2_MB=40
timeout 150 gpu-bundle/gpu-tests-s16 "sampled fused" > $OUT/tests-sampled.log 2>&1; echo "sampled rc=$?"; grep -E "^test|result" $OUT/tests-sampled.log | tail -6
timeout 90 gpu-bundle/gpu-tests-s16 --small "bf16 plain" > $OUT/tests-small.log 2>&1; echo "small rc=$?"; tail -n 3 $OUT/tests-small.log
