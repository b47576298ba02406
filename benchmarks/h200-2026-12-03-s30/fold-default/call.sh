#!/usr/bin/env bash
# s30 call 3: the plain sm90 forward's fold off the MMA warpgroups as the default (FLCE_SM90_MAINLOOP
# fold=2: the compact forward keeps its in-register fold, both on a 3-stage ring) — gpu-bundle =
# 1722428 with the default flipped to fold=2 (working tree); flce-main = 0c3ca2b.
# GPU cases of the new default (every dtype, option, shape, pairs / bands / 2 SMs, each with its
# three-product runs), memcheck / racecheck / synccheck; main / new (and new with fold=0 = main's
# kernels) at Gemma 2, Llama 3 (4 GB) and the 16k loss (2 GB), 3 rounds; the 16k training step.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 170 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck racecheck synccheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (1,64,1000)" \
    "bf16 softcap (300,128,2049)" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|gpu:" /tmp/$tool.log | tail -n 2
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 100 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" "new-fold0=$B/flce:FLCE_SM90_MAINLOOP=fold=0" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 50 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" "new-fold0=$B/flce:FLCE_SM90_MAINLOOP=fold=0" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -A4 "^| tokens" "$OUT/train.log"
cat "$OUT/variants.md"
