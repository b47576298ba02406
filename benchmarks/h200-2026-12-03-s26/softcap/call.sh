#!/usr/bin/env bash
# s26 call 4: the softcap in 7 instructions (loss.cuh softcap_logit: ex2.approx.ftz and
# rcp.approx.ftz, z = ±(2s·r − s)) where __expf's non-ftz range handling made 13; the sm90 fold
# and G in the FFMA form 2^(z·log2e − m2) (types.cuh Exp2Ref); the fold's chains knob
# (FLCE_SM90_MAINLOOP chains=1|2|4, default 1). The pipe shares of call 1 removed. Binaries:
# flce + gpu-tests = the working tree on a50811a; flce-main = a50811a. Checks (the loss-math
# probe, softcap and option cases in every dtype, memcheck, chains=4 cases), then forward and
# fwd+bwd of main / new / new chains=4, plain and softcap, 5 interleaved rounds each.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 130 $B/gpu-tests --small loss-math "bf16 softcap" "f16 softcap" "f32 softcap" "bf16 all (" "f16 all" "f32 all" \
  "bf16 plain (" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|loss-math \.\.\." "$OUT/tests.log" | cut -c1-400 | head -8; tail -n 1 "$OUT/tests.log"
FLCE_SM90_MAINLOOP=chains=4 timeout 30 $B/gpu-tests --small "bf16 plain (300,128,2049)" "bf16 softcap (300,128,2049)" \
  "f16 all (257,520,300)" > "$OUT/tests-chains4.log" 2>&1
echo "chains=4 tests rc=$?: $(tail -n 1 "$OUT/tests-chains4.log")"
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (300,128,2049)" \
  "bf16 softcap (300,128,2049)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
V=("main=$B/flce-main" "new=$B/flce" "chains4=$B/flce:FLCE_SM90_MAINLOOP=chains=4")
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/plain timeout 200 bash scripts/gpu-variants.sh 5 \
  "${V[@]}" > "$OUT/variants-plain.md" 2>&1
echo "plain at ${SECONDS}s"
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options softcap" OUT=$runs/softcap timeout 200 \
  bash scripts/gpu-variants.sh 5 "${V[@]}" > "$OUT/variants-softcap.md" 2>&1
for o in plain softcap; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
echo "== plain"; cat "$OUT/variants-plain.md"; echo "== softcap"; cat "$OUT/variants-softcap.md"
