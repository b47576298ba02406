#!/usr/bin/env bash
# s29 call 4: the compact forward's q through TMA stores (stmatrix into per-warp 1 KB boxes,
# 64-byte swizzle, one TMA store per 16 × 32 box; the warps no longer wait for their global
# stores) — gpu-bundle = working tree on 8472bce; flce-main = 8472bce.
# GPU cases with their three-product runs (bf16 / f16, options, N = 1, partial tiles), memcheck,
# synccheck, racecheck; ncu of the compact forward at the 16k loss shape (one chunk); main / new
# at Gemma 2, Llama 3 (4 GB) and the 16k loss (2 GB), 3 rounds; the 16k training step.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 110 $B/gpu-tests --small "bf16 plain (" "bf16 nosoftcap (" "f16 plain (" "bf16 bias (257" "bf16 smoothing (257" \
  "bf16 weights (257" "bf16 zloss (257" "bf16 ignore7 (257" "f16 nosoftcap (" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck synccheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 plain (129,200,5003)" \
    "bf16 nosoftcap (1,64,1000)" > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|gpu:" "$OUT/$tool.log" | tail -n 2
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_write.sum
for bin in flce-main flce; do
  timeout 40 ncu --clock-control none -k "regex:flce_sm90_forward_compact" -c 2 --csv --metrics $M \
    $B/$bin bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 6144 > "$OUT/ncu-$bin.csv" 2> /dev/null
  echo "ncu $bin rc=$?"; grep '"gpu__time_duration.sum"' "$OUT/ncu-$bin.csv" | cut -d, -f5,15- | head -2
done
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 120 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 60 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -A4 "^| tokens" "$OUT/train.log"
cat "$OUT/variants.md"
