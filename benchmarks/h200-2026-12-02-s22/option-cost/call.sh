#!/usr/bin/env bash
# s22 call 3, bundle at the commit "flce bench --loss-options bias / smoothing" (gpu-prepare.sh):
# (in this order: 3. first, then 1. and 2.)
# 1. what each logit option costs under the default (auto: the sm90 family since this session),
#    same run: plain / softcap / bias / smoothing / all at Gemma 2 and Llama 3, 1 round;
# (2., Llama 3 at 128k with a softcap, and a second round of 1. were cut for device time)
# 3. the GPU cases the previous call's cap left out (phases: the vocabulary slices' backward,
#    de-pass, shift) and memcheck of the slice backward with every option.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call3.sh "$OUT/call.sh"
B=gpu-bundle
timeout 100 $B/gpu-tests --small "phases" "de-pass" "shift" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED" "$OUT/tests.log" | cut -c1-200; tail -n 1 "$OUT/tests.log"
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "phases bf16 all (300,128,2049)" \
  "bf16 all (3000,64,4000) de-pass" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1; do
  for o in plain softcap bias smoothing all; do
    timeout 60 $B/flce bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options $o 2>&1 \
      | row | sed "s/^/$r $o /" >> "$OUT/cost.log"
  done
done
echo "round options | shape | cuBLAS | fwd | fwd+bwd"; sort -t'|' -k2,2 -s "$OUT/cost.log" | cut -d'|' -f1-5
