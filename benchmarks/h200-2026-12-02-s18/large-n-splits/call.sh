#!/usr/bin/env bash
# s18 call 4: the sm90 forward past 16k tokens with up to 16 splits (the L2 grid of 8k tokens)
# against the partials-capped grid (old-bundle = 5b3… paired default), and the large sampled cases.
set -uo pipefail
L=/tmp/logs-c4; mkdir -p $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
timeout 200 gpu-bundle/gpu-tests "llama3-128k sampled fused" "past-2^31 (16384,256,256000) sampled fused" > $L/gpu-tests-large.log 2>&1
echo "exit $?" >> $L/gpu-tests-large.log
for s in 16384,4096,128256 32768,4096,128256 65536,4096,128256 131072,4096,128256; do
  OUT=$L/v-$s SHAPES=$s BENCH_ARGS="--step-budget-mb 0 --iters 5" timeout 120 bash scripts/gpu-variants.sh 2 \
    "capped=old-bundle/flce" "splits16=gpu-bundle/flce" > $L/variants-$s.md 2>&1
done
tar czf "$OUT/logs.tgz" -C /tmp logs-c4
grep "^test\|^exit" $L/gpu-tests-large.log | cut -c1-220
cat $L/variants-*.md | grep -v "^|---" | awk 'NR==1 || !/^\| shape/'
