#!/usr/bin/env bash
# s42 call 2: the ordered compact forward (FLCE_SM90_COMPACT_ORDER, opt-in): GPU cases (each case's
# three-product check runs the compact forward on its grid and ordered), memcheck, then timing
# grid against ordered (flce bench's three-product pass at 8 GB: one chunk at the model shapes;
# 2 GB at the 16k training-step loss), 3 interleaved rounds.
set -uo pipefail
L=${OUT:-gpu-logs}; mkdir -p "$L"; cp "$0" "$L/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
timeout 200 ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" "nosoftcap (129,200,5003)" "(1,64,1000)" "2 SMs" \
  "bf16 plain (3000,64,12000)" "f16 zloss (640,520,3000)" "rest 18 SMs" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $L/tests.log) failed=$(grep -c 'FAILED' $L/tests.log) of $(grep -c '^test ' $L/tests.log)"
timeout 150 compute-sanitizer --tool memcheck --print-limit 20 ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" \
  "bf16 nosoftcap (1024,64,8000)" > $L/memcheck.log 2>&1
echo "memcheck rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1)"
OUT=$L/ab BENCH_ARGS="--step-budget-mb 8192 --iters 10" SHAPES="gemma2,llama3,qwen25" timeout 170 bash scripts/gpu-variants.sh 3 \
  "grid=gpu-bundle/flce:FLCE_SM90_COMPACT_ORDER=0" "ordered=gpu-bundle/flce:FLCE_SM90_COMPACT_ORDER=1" > $L/ab.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -12 $L/ab.txt
OUT=$L/ab16k BENCH_ARGS="--step-budget-mb 2048 --iters 10" SHAPES="16384,2048,128256" timeout 90 bash scripts/gpu-variants.sh 3 \
  "grid=gpu-bundle/flce:FLCE_SM90_COMPACT_ORDER=0" "ordered=gpu-bundle/flce:FLCE_SM90_COMPACT_ORDER=1" > $L/ab16k.txt 2>&1
echo "ab16k rc=$? ${SECONDS}s"; tail -6 $L/ab16k.txt
tar czf $L/ab-logs.tgz -C $L ab ab16k && rm -rf $L/ab $L/ab16k
