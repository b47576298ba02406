#!/usr/bin/env bash
# s24 call 5, bundle at the forward-in-halves working tree again (9c6ad9a's code with the
# consumer's halves in straight-line pairs: ptxas no longer injects a full wgmma wait before the
# fold, C7517). 1. bf16 / f16 GPU cases with overlap 2 (the fold now really runs under the
# tensor cores); memcheck; 2. timing: default / halves overlap 2, 3, 4, plain and softcap.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call5.sh "$OUT/call.sh"
B=gpu-bundle
FLCE_SM90_MAINLOOP=halves=1,overlap=2 timeout 100 $B/gpu-tests --small "bf16 plain" "bf16 all" "bf16 nosoftcap" "bf16 softcap" "f16 none" > "$OUT/tests-overlap2.log" 2>&1
echo "overlap2 tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests-overlap2.log"; grep FAILED "$OUT/tests-overlap2.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests-overlap2.log"
FLCE_SM90_MAINLOOP=halves=1,overlap=2 timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
  "bf16 plain (300,128,2049)" "bf16 nosoftcap (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 330 ] && { echo "round 2 cut at ${SECONDS}s"; break; }
  for m in default halves=1,overlap=2 halves=1,overlap=3 halves=1,overlap=4; do
    env=""; [ $m != default ] && env="FLCE_SM90_MAINLOOP=$m"
    timeout 60 env $env $B/flce bench --shapes gemma2,llama3 --iters 5 2>&1 | row | sed "s/^/$r plain $m /" >> "$OUT/bench.log"
  done
  for m in default halves=1,overlap=3; do
    env=""; [ $m != default ] && env="FLCE_SM90_MAINLOOP=$m"
    timeout 60 env $env $B/flce bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options softcap 2>&1 | row | sed "s/^/$r softcap $m /" >> "$OUT/bench.log"
  done
done
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd | three-product"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-6
