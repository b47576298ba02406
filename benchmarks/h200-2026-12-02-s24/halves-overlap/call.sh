#!/usr/bin/env bash
# s24 call 2, bundle at the forward-in-halves working tree (scripts/gpu-prepare.sh): the sm90
# forward folding 128-column halves, each under the next one's first P k-steps
# (FLCE_SM90_MAINLOOP="halves=1,overlap=P", kernels/sm90/forward_halves.cuh).
# 1. GPU cases in bf16 / f16 with overlap 2 (plain, options, compact three-product runs, N = 1,
#    awkward V), and the default mode's (whose fold and m_ref layout changed too);
# 2. memcheck of the overlapped forward; 3. timing: forward and fwd+bwd at Gemma 2 / Llama 3 for
#    the default, halves without overlap, overlap 2..4 (with the three-product pass at 4 GB); softcap for the default and overlap 2 / 4.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call2.sh "$OUT/call.sh"
B=gpu-bundle
FLCE_SM90_MAINLOOP=halves=1,overlap=2 timeout 180 $B/gpu-tests --small "bf16" "f16" > "$OUT/tests-overlap2.log" 2>&1
echo "overlap2 tests rc=$?"; grep FAILED "$OUT/tests-overlap2.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests-overlap2.log"
timeout 70 $B/gpu-tests --small "bf16 plain" "bf16 all" "nosoftcap" > "$OUT/tests-default.log" 2>&1
echo "default tests rc=$?"; grep FAILED "$OUT/tests-default.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests-default.log"
FLCE_SM90_MAINLOOP=halves=1,overlap=2 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
  "bf16 plain (300,128,2049)" "bf16 nosoftcap (257,520,300)" "bf16 softcap (1,64,1000)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 380 ] && { echo "round 2 cut at ${SECONDS}s"; break; }
  for m in default halves=1 halves=1,overlap=2 halves=1,overlap=3 halves=1,overlap=4; do
    env=""; [ $m != default ] && env="FLCE_SM90_MAINLOOP=$m"
    timeout 60 env $env $B/flce bench --shapes gemma2,llama3 --iters 5 2>&1 | row | sed "s/^/$r plain $m /" >> "$OUT/bench.log"
  done
  for m in default halves=1,overlap=2 halves=1,overlap=4; do
    env=""; [ $m != default ] && env="FLCE_SM90_MAINLOOP=$m"
    timeout 60 env $env $B/flce bench --shapes gemma2,llama3 --iters 5 --loss-options softcap 2>&1 | row | sed "s/^/$r softcap $m /" >> "$OUT/bench.log"
  done
done
head -3 "$OUT/bench.log" | cut -c1-200
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd | three-product"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-6
