#!/usr/bin/env bash
# s30 call 2: the sm90 forwards' fold off the MMA warpgroups, FLCE_SM90_MAINLOOP=fold=1, now with
# only the forwards on a 3-stage ring (07c478e; G and the product kernel keep 4) — gpu-bundle =
# 07c478e (its default kernels' SASS = main's); flce-main = 0c3ca2b.
# Correctness of the fold (f16, options, pairs / unpaired, 2 SMs, bands; each case's compact
# three-product runs), memcheck and racecheck of the staged handoff; per-kernel times of the 16k
# training-step loss (2 GB: 3 chunks) main / fold under torch.profiler; main / fold / fold with
# stages=3 everywhere at Gemma 2, Llama 3 (4 GB) and the 16k loss (2 GB), 3 rounds; the 16k
# training step with fold (against Liger).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
export FLCE_SM90_MAINLOOP=fold=1
timeout 100 $B/gpu-tests --small "f16 plain (" "f16 all (" "f16 nosoftcap (" "bf16 none (" "bf16 sum (255" \
  "bf16 zloss (255" "bf16 weights (255" "pairs" "unpaired" "2 SMs" "band" > "$OUT/tests-fold.log" 2>&1
echo "fold tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-fold.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests-fold.log" | cut -c1-300 | head -6
for tool in memcheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (1,64,1000)" \
    "bf16 plain (300,128,2049)" > /tmp/$tool.log 2>&1
  echo "fold $tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|gpu:" /tmp/$tool.log | tail -n 2
  { echo "== compute-sanitizer --tool $tool, FLCE_SM90_MAINLOOP=fold=1"; cat /tmp/$tool.log; } >> "$OUT/tests-fold.log"
done
unset FLCE_SM90_MAINLOOP
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
for knob in "" "fold=1"; do
  echo "## FLCE_SM90_MAINLOOP=$knob" >> "$OUT/profile.log"
  FLCE_SM90_MAINLOOP=$knob PYTHONPATH=/tmp/site timeout 50 python3 scripts/profile_kernels.py --shape train16k --launches \
    --top 10 --configs auto/auto/2147483648 >> "$OUT/profile.log" 2>&1
  echo "profile '$knob' rc=$? at ${SECONDS}s"
done
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 110 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "fold=$B/flce:FLCE_SM90_MAINLOOP=fold=1" "fold-s3=$B/flce:FLCE_SM90_MAINLOOP=stages=3,fold=1" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 60 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "fold=$B/flce:FLCE_SM90_MAINLOOP=fold=1" "fold-s3=$B/flce:FLCE_SM90_MAINLOOP=stages=3,fold=1" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
FLCE_SM90_MAINLOOP=fold=1 PYTHONPATH=/tmp/site timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G \
  --rounds 2 --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train (fold) rc=$? at ${SECONDS}s"; grep -A4 "^| tokens" "$OUT/train.log"
grep -E "^\| |^## " "$OUT/profile.log" | grep -v "^| ---" | head -40
cat "$OUT/variants.md"
