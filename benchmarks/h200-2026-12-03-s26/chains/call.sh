#!/usr/bin/env bash
# s26 call 3: the forward's fold in 4 independent max / sum chains per row (FLCE_SM90_MAINLOOP
# chains=4, the tree's default now; pipe shares 0: every exponential on MUFU, in the FFMA form
# 2^(z·log2e − m2)). Call 2's ncu: 42% of the fold's warp samples wait on fixed-latency
# dependencies, the max and sum chains of 64 links a row. Binaries: flce + gpu-tests = the working
# tree on a50811a; flce-main = a50811a. Checks, then timing (gpu-variants.sh): main / chains4 /
# chains1 (the FFMA form alone) plain, 3 rounds; main / chains4 softcap, 2 rounds; then the new
# fold's stall samples by SASS line at Gemma 2 (ncu SourceCounters), as call 2 took main's.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 140 $B/gpu-tests --small pipe-math "bf16 plain" "bf16 softcap" "bf16 all (" "f16 softcap" "f32 all" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep -E "FAILED|pipe-math \.\.\." "$OUT/tests.log" | cut -c1-300 | head -8; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (300,128,2049)" \
  "bf16 softcap (300,128,2049)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/plain timeout 200 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "chains4=$B/flce" "chains1=$B/flce:FLCE_SM90_MAINLOOP=chains=1" > "$OUT/variants-plain.md" 2>&1
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options softcap" OUT=$runs/softcap timeout 120 \
  bash scripts/gpu-variants.sh 2 "main=$B/flce-main" "chains4=$B/flce" > "$OUT/variants-softcap.md" 2>&1
for o in plain softcap; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
echo "variants at ${SECONDS}s"
[ $SECONDS -lt 470 ] && timeout 100 ncu --clock-control none -k 'regex:^flce_sm90_forward$' -c 1 --section WarpStateStats \
  --section SourceCounters --page source --csv --print-source sass \
  $B/flce bench --shapes gemma2 --forward auto --backward auto --step-budget-mb 0 > /tmp/chains4-plain.csv 2>&1
gzip -c /tmp/chains4-plain.csv > "$OUT/chains4-plain-source.csv.gz"
echo "== plain"; cat "$OUT/variants-plain.md"; echo "== softcap"; cat "$OUT/variants-softcap.md"
