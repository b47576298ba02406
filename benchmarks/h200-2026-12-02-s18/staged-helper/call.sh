#!/usr/bin/env bash
# s18 call 5: the shared staged-store helper (G and the compact forward's q): GPU tests, memcheck,
# timing against old-bundle (c6e3125) at the train step's loss shape (G in fwd+bwd, the compact
# forward in the three-product pass).
set -uo pipefail
L=/tmp/logs-c5; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 100 gpu-bundle/gpu-tests --small "bf16 plain" "f16 plain" "bf16 all" "pairs" "bf16 zloss" > $L/gpu-tests.log 2>&1
echo "exit $?" >> $L/gpu-tests.log
timeout 55 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck.log 2>&1
echo "exit $?" >> $L/memcheck.log
OUT=$L/v SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048 --iters 5" timeout 90 bash scripts/gpu-variants.sh 2 \
  "old=old-bundle/flce" "new=gpu-bundle/flce" > $L/variants.md 2>&1
tar czf "$OUT/logs.tgz" -C /tmp logs-c5
for f in gpu-tests memcheck; do echo "$f: $(grep -c '\.\.\. ok' $L/$f.log) ok, $(grep -c FAILED $L/$f.log) failed; $(grep -h '^exit\|^gpu:\|ERROR SUMMARY' $L/$f.log | tr '\n' ' ')"; done
grep -h FAILED $L/*.log | head -3 | cut -c1-300
cat $L/variants.md
