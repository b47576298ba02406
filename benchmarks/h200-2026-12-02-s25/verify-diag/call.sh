#!/usr/bin/env bash
# s25 call 4: verify 63b3163 (main's kernels + softcap_slope in logit_grad / grad_with_options),
# then the ping-pong diagnosis: each variant's forward with its fold skipped (measurement only,
# noepi-d5dd01b.patch) beside main, and main + the plain-only default fold alone (cand1.patch).
# Binaries: flce + gpu-tests 63b3163; flce-main d556244; flce-pp d5dd01b; flce-skip d5dd01b +
# noepi; flce-cand1 d556244 + cand1.patch (FOLD_LANES 1: main's fold order, default module plain-only).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 150 $B/gpu-tests --small "bf16 softcap" "f16 softcap" "f32 softcap" "bf16 all" "f16 all" "f32 all" "phases" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep FAILED "$OUT/tests.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 softcap (300,128,2049)" \
  "f32 softcap (257,520,300)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
PP=FLCE_SM90_MAINLOOP=pingpong=1
for r in 1 2 3; do
  [ $r -gt 1 ] && [ $SECONDS -gt 440 ] && { echo "round $r cut at ${SECONDS}s"; break; }
  for v in main cand1 pp skip skip-pp; do
    case $v in
      main) cmd=($B/flce-main) ;;
      cand1) cmd=($B/flce-cand1) ;;
      pp) cmd=(env $PP $B/flce-pp) ;;
      skip) cmd=($B/flce-skip) ;;
      skip-pp) cmd=(env $PP $B/flce-skip) ;;
    esac
    timeout 60 "${cmd[@]}" bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 2>&1 | row \
      | sed "s/^/$r plain $v /" >> "$OUT/bench.log"
  done
  for v in main final; do
    bin=$B/flce; [ $v = main ] && bin=$B/flce-main
    timeout 60 $bin bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options softcap 2>&1 \
      | row | sed "s/^/$r softcap $v /" >> "$OUT/bench.log"
  done
done
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-5
