#!/usr/bin/env bash
# s23 call 3, bundle at wip/compact-options (scripts/gpu-prepare.sh): the three-product pass's
# compact logits for calls with a bias / smoothing / class weights (f32 logits before).
# 1. the GPU option cases (each runs the three-product pass with f32 and, where the planner now
#    picks it, compact logits, 1 and several token chunks; softcap cases check that a compact
#    plan is refused); 2. memcheck of the compact option modules and G with db / smoothing;
# 3. the three-product pass, compact (default now) against FLCE_STEP_LOGITS=f32, plain / bias /
#    smoothing, at Llama 3 (4 GB) and the train step's loss shape (16384, 2048, 128256; 2 GB).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call3.sh "$OUT/call.sh"
B=gpu-bundle
timeout 150 $B/gpu-tests --small "bias" "smoothing" "weights" "softcap" "all (257" "chunked-budget" > "$OUT/tests.log" 2>&1
echo "option tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep FAILED "$OUT/tests.log" | cut -c1-300; tail -n 1 "$OUT/tests.log"
echo "cases with compact three-product runs: $(grep -c 'compact 1 chunk' "$OUT/tests.log")"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (257,520,300)" \
  "f16 bias (257,520,300)" "bf16 nosoftcap (1024,64,8000)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 400 ] && { echo "round 2 cut at ${SECONDS}s"; break; }
  for o in plain bias smoothing; do
    for st in compact f32; do
      env=""; [ $st = f32 ] && env="FLCE_STEP_LOGITS=f32"
      timeout 60 env $env $B/flce bench --shapes llama3 --iters 5 --step-budget-mb 4096 --loss-options $o 2>&1 \
        | row | sed "s/^/$r $o $st /" >> "$OUT/step.log"
      timeout 60 env $env $B/flce bench --shapes 16384,2048,128256 --iters 5 --step-budget-mb 2048 --loss-options $o 2>&1 \
        | row | sed "s/^/$r $o $st /" >> "$OUT/step.log"
    done
  done
done
echo "round options storage | shape | cuBLAS | fwd | fwd+bwd | three-product"; sort -k2,3 -s "$OUT/step.log" | cut -d'|' -f1-6
