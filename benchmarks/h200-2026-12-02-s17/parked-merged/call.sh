#!/usr/bin/env bash
# s17 call 1: the two parked changes of s16, rebased on main 1a4c3e4, measured together.
# old-bundle = main 1a4c3e4; stg-bundle = rb/compact-staged-stores (q of whole tiles through
# per-warp smem staging); dch-bundle = rb/dc-head-in-dc (dC accumulator's first 128k rows in
# dC's buffer); both-bundle = try/both (the two merged). Tests + memcheck on both-bundle (union
# of each script's cases), timing interleaved.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > $L/gpu.txt
timeout 130 both-bundle/gpu-tests --small "f16 plain" "f16 zloss" "ignore7" "f16 shift" "bf16 all" "chunked-budget" > $L/gpu-tests.log 2>&1; echo "exit $?" >> $L/gpu-tests.log
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 both-bundle/gpu-tests --small "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck.log 2>&1; echo "exit $?" >> $L/memcheck.log
mkdir -p $L/a $L/b
OUT=$L/a SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 170 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "stg=stg-bundle/flce" "dch=dch-bundle/flce" "both=both-bundle/flce" > $L/v-train.md 2>&1
OUT=$L/b BENCH_ARGS="--step-budget-mb 4096" timeout 110 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "stg=stg-bundle/flce" > $L/v-models.md 2>&1
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in gpu-tests memcheck; do echo "$f: $(grep -h '^gpu:\|^exit\|ERROR SUMMARY\|test result' $L/$f.log | tr '\n' ' ')"; done
grep -c '\.\.\. ok' $L/gpu-tests.log; grep -h FAILED $L/gpu-tests.log | head -3 | cut -c1-300
cat $L/v-train.md $L/v-models.md
