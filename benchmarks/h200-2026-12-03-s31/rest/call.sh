#!/usr/bin/env bash
# s31 call 3: the sm90 forward grids with a rest (plan::Sm90Rest; 609d889) and the compact forward's
# 16 MB grid by default (f1b7400) — gpu-bundle = 683d7d1 (f1b7400 + the staged G behind gfold=1, off); flce-main = 8ba5fb1 (b7de9d2's kernels).
# GPU cases (the rest cases, pairs, bands, 2 SMs; each with its three-product runs), memcheck /
# racecheck / synccheck on rest cases; main / rest only (compact grid at 32 MB as main) / new at
# Gemma 2, Llama 3, Qwen 2.5 (three-product at 4 GB) and the 16k loss (2 GB), 3 rounds; ncu of the
# forward with and without the rest at Llama 3 and Qwen 2.5 beside cuBLAS's GEMM; the 16k step.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 120 $B/gpu-tests --small " rest " pairs band "2 SMs" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck racecheck synccheck; do
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 plain (1000,64,2200) rest 18 SMs cluster 2" \
    "f16 zloss (700,520,4300) rest 34 SMs cluster 2" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\.\.\. " /tmp/$tool.log | tail -n 3
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
runs=$(mktemp -d)
V=("main=$B/flce-main" "rest=$B/flce:FLCE_SM90_COMPACT_L2_MB=32" "new=$B/flce")
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 170 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 60 bash scripts/gpu-variants.sh 3 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for s in llama3 qwen25; do
  for r in 0 1; do
    echo "== $s FLCE_SM90_REST=$r" >> "$OUT/ncu.txt"
    FLCE_SM90_REST=$r timeout 30 ncu --clock-control none -k "regex:^flce_sm90_forward$" -c 1 --csv --metrics $M \
      $B/flce bench --shapes $s --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
  done
  echo "== $s cuBLAS" >> "$OUT/ncu.txt"
  timeout 30 ncu --clock-control none -k "regex:nvjet|gemm" -c 1 --csv --metrics $M \
    $B/flce bench --shapes $s --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
  echo "ncu $s at ${SECONDS}s"
done
grep -E "==|duration" "$OUT/ncu.txt" | cut -c1-120
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 60 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out /tmp/train.json > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -A4 "^| tokens" "$OUT/train.log"
cat "$OUT/variants.md"
