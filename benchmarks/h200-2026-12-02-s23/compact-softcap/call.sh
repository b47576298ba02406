#!/usr/bin/env bash
# s23 call 6, bundle at wip/compact-softcap (scripts/gpu-prepare.sh): compact three-product
# logits for softcap calls without smoothing. 1. the softcap GPU cases, bf16 / f16 (each runs the
# pass with f32 and compact logits) and the "all" cases (softcap + smoothing: a compact plan is
# refused); 2. memcheck of two compact softcap cases; 3. Gemma 2 with a softcap of 30, 4 GB:
# compact (default now) against FLCE_STEP_LOGITS=f32, and plain, one round.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call6.sh "$OUT/call.sh"
B=gpu-bundle
timeout 90 $B/gpu-tests --small "bf16 softcap" "f16 softcap" "bf16 all (257" "f16 all (255" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep FAILED "$OUT/tests.log" | cut -c1-300; tail -n 1 "$OUT/tests.log"
echo "cases with compact three-product runs: $(grep -c 'compact 1 chunk' "$OUT/tests.log")"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 softcap (257,520,300)" \
  "f16 softcap (300,128,2049)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for run in "softcap compact" "softcap f32" "plain compact"; do
  set -- $run; env=""; [ $2 = f32 ] && env="FLCE_STEP_LOGITS=f32"
  timeout 60 env $env $B/flce bench --shapes gemma2 --iters 5 --step-budget-mb 4096 --loss-options $1 2>&1 \
    | row | sed "s/^/$1 $2 /" >> "$OUT/step.log"
done
cut -d'|' -f1-6 "$OUT/step.log"
