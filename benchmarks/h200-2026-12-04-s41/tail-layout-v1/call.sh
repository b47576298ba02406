#!/usr/bin/env bash
# s41 call 2: the tail pass's chunks laid out from V backwards (e258332, plan only): GPU cases
# with tails against f64 (bitwise twice), then timed against the build before it (flce-old, a9ea9fc),
# interleaved, two rounds, the model shapes and the 16k training step's loss shape.
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs2; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 270 ./gpu-bundle/gpu-tests --small "bf16 plain (" "bf16 all (" "f16 none (" "de-head" "long-tail" "token-chunks" "de-pass" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c ' ok ' $L/tests.log) of $(grep -c '^test ' $L/tests.log)"; grep -E "FAILED|panicked|failed" $L/tests.log | head
OUT=$L/ab SHAPES="gemma2,llama3,qwen25 16384,2048,128256" BENCH_ARGS="--iters 5 --step-budget-mb 0" timeout 300 bash scripts/gpu-variants.sh 2 \
  "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > $L/ab.txt 2>&1
echo "ab rc=$? ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs2
tail -25 $L/ab.txt
