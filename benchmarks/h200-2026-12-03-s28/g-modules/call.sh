#!/usr/bin/env bash
# s28 call 4: flce_grad_from_compact in a module per set of logit options (the default module
# without the smoothing term, the softcap slope and db: 70 → 32 registers, 3 → 8 blocks an SM)
# and the vector rounding (gpu-bundle = HEAD; flce-main = 78d62df, kernels as c6b487c).
# The compact cases with and without options (their three-product runs), memcheck, ncu of every
# G launch, then main / new at Gemma 2, Llama 3 (4 GB) and the 16k loss shape (2 GB), 3 rounds.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 60 $B/gpu-tests --small "bf16 bias (257" "bf16 smoothing (257" "bf16 softcap (" "bf16 nosoftcap (" "bf16 zloss (257" \
  "bf16 plain (" "f16 nosoftcap (" "f16 bias (257" "bf16 weights (257" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (257,520,300)" \
  "bf16 plain (129,200,5003)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread
for bin in flce-main flce; do
  timeout 40 ncu --clock-control none -k "regex:flce_grad_from_compact" -c 6 --csv --metrics $M \
    $B/$bin bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 2048 > "$OUT/ncu-$bin.csv" 2> /dev/null
  echo "ncu $bin rc=$? at ${SECONDS}s"
  grep flce_grad_from_compact "$OUT/ncu-$bin.csv" | grep -E "duration|registers" | cut -d, -f1,13- | head -4
done
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 60 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 45 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
cat "$OUT/variants.md"
