#!/usr/bin/env bash
# s41 call 3: the tail's chunks on tile boundaries (5912082, plan only): the GPU cases with tails
# against f64 (bitwise twice; call 2's build failed 54 sm80 cases), ncu's G launches of the old
# build (flce-old, a9ea9fc) and this one at Llama 3 and Gemma 2, and five interleaved rounds timed.
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs3; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 270 ./gpu-bundle/gpu-tests --small "bf16 plain (" "bf16 all (" "f16 none (" "de-head" "long-tail" "token-chunks" "de-pass" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c ' ok ' $L/tests.log) failed=$(grep -c 'FAILED' $L/tests.log)"; grep -E "FAILED|panicked" $L/tests.log | head -5
for b in old new; do
  bin=gpu-bundle/flce; [ $b = old ] && bin=gpu-bundle/flce-old
  BIN=$bin T_NCU=60 OUT=$L/ncu KERNEL=flce_sm90_grad SHAPES="llama3 gemma2" COUNT=20 bash scripts/ncu-launch-metrics.sh $b= > $L/ncu-$b.txt 2>&1
done
echo "ncu ${SECONDS}s"; grep "(sum)" $L/ncu-*.txt
OUT=$L/ab SHAPES="gemma2,llama3,qwen25 16384,2048,128256" BENCH_ARGS="--iters 5 --step-budget-mb 0" timeout 200 bash scripts/gpu-variants.sh 5 \
  "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > $L/ab.txt 2>&1
echo "ab rc=$? ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs3
tail -10 $L/ab.txt
