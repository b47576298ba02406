#!/usr/bin/env bash
# s23 call 1, bundle at wip/options-prepass (the option modules' transforms column by column;
# scripts/gpu-prepare.sh) plus gpu-tests-main / flce-main built at main d28f654 and flce-staged
# (the branch with G of whole option tiles through the staging slices instead of 4-byte stores):
# 1. the GPU option cases on the branch, and the same bf16 cases on main: the printed errors
#    must be the same digits (the transforms are the same arithmetic in the same order);
# 2. compute-sanitizer memcheck of the branch's bias / smoothing / f16-all / slice / de-pass modules;
# 3. fwd+bwd main vs branch (direct stores) vs staged, softcap / bias / smoothing / all / plain,
#    Gemma 2 and Llama 3, 2 rounds interleaved.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call1.sh "$OUT/call.sh"
B=gpu-bundle
timeout 60 $B/gpu-tests --small "bf16 all" "bf16 softcap" "bf16 bias" "bf16 smoothing" "bf16 weights" > "$OUT/tests-bf16.log" 2>&1
echo "branch bf16 tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests-bf16.log"; grep FAILED "$OUT/tests-bf16.log" | cut -c1-200
timeout 60 $B/gpu-tests-main --small "bf16 all" "bf16 softcap" "bf16 bias" "bf16 smoothing" "bf16 weights" > "$OUT/tests-bf16-main.log" 2>&1
echo "main bf16 tests rc=$?"
diff <(grep "^test" "$OUT/tests-bf16.log") <(grep "^test" "$OUT/tests-bf16-main.log") > "$OUT/tests-bf16.diff"
echo "bf16 cases whose printed errors differ from main: $(grep -c '^<' "$OUT/tests-bf16.diff") (of $(grep -c '^test' "$OUT/tests-bf16.log") on the branch, $(grep -c '^test' "$OUT/tests-bf16-main.log") on main)"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 bias (257,520,300)" \
  "bf16 smoothing (257,520,300)" "f16 all (257,520,300)" "phases bf16 all (300,128,2049)" "bf16 all (3000,64,4000) de-pass" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 380 ] && { echo "round 2 cut at ${SECONDS}s"; break; }
  for o in softcap bias smoothing all; do
    for b in main prepass staged; do
      bin=$B/flce-$b; [ $b = prepass ] && bin=$B/flce
      timeout 60 $bin bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options $o 2>&1 \
        | row | sed "s/^/$r $o $b /" >> "$OUT/cost.log"
    done
  done
done
for b in main prepass; do
  bin=$B/flce-$b; [ $b = prepass ] && bin=$B/flce
  timeout 60 $bin bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options plain 2>&1 | row | sed "s/^/1 plain $b /" >> "$OUT/cost.log"
done
left=$((575 - SECONDS)); [ $left -lt 20 ] && left=20; echo "tests-rest gets ${left}s"
timeout $left $B/gpu-tests --small "f16 all" "f16 softcap" "f16 bias" "f16 smoothing" "f32 all" "phases" "de-pass" > "$OUT/tests-rest.log" 2>&1
echo "branch f16/f32/phases tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests-rest.log"; grep FAILED "$OUT/tests-rest.log" | cut -c1-200; tail -n 1 "$OUT/tests-rest.log"
echo "round options binary | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,2 -s "$OUT/cost.log" | cut -d'|' -f1-5
