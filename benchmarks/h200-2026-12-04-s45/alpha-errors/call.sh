#!/usr/bin/env bash
# s45 call 3: suite errors (and times) at the sweep's other N and at f16/f32/flat data, then the one
# GPU case call 2 did not reach, and racecheck on the smallest case
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
T=./gpu-bundle/gpu-tests
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 220 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out /tmp/suite \
  --shapes gemma2 --data peaky,flat --dtypes bf16 --extra-dtypes f16,f32 --methods flce,flce_fast,cublas --budgets none \
  --sweep 1024,4096,65536,131072 --sweep-methods flce,flce_fast,cublas --rep-ms 200 --max-minutes 3 > "$OUT/suite.log" 2>&1
echo "suite rc=$? ${SECONDS}s"
timeout 170 $T "llama3-128k sampled fused" > "$OUT/tests-128k.log" 2>&1 &
timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 $T --small "bf16 all (1,64,1000)" > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck.log | tail -1)"
wait
echo "128k: $(grep '^test' $OUT/tests-128k.log | cut -c1-200)"
grep -a " bf16 \| f16 \| f32 " "$OUT/suite.log" | grep -av "%|" | cut -c1-120
echo "total ${SECONDS}s"
