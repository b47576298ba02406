#!/usr/bin/env bash
# Whether the three-product pass's compact forward should plan its grid within 16 MB of L2 instead
# of the forward's 32 (Sm90Tuning::compact_l2_budget, knob FLCE_SM90_COMPACT_L2_MB; perf-notes v39:
# FLCE_SM90_L2_MB=16 ran the 16k pass 0.981× in one 3-round call, s30 call 5; v22 tried 24 / 16 MB
# once before the q stores became TMA evict-first: 0.979–1.023×, run spread). At the 16k
# training-step loss with 2 GB the chunks are 6144 / 6144 / 4096 tokens: 32 MB plans 12 slots ×
# 11 splits (and 32 × 4 for the last), 16 MB 16 × 8 for all three — each C tile shared by 16 token
# tiles instead of 12 (3 passes over C a chunk instead of 4) at a 2.7% longer longest block. The
# other shapes' plans do not change (Gemma 2 at 4 GB: 32 × 4 → 16 × 8 — also timed; Llama 3 16 × 8
# either way; 16k at 1792 MB 10 × 13 either way). ~5 minutes, 5 files:
#   bash scripts/gpu-prepare.sh, then through the device tool, carrying gpu-bundle (and .whl/small
#   with the liger-kernel 0.8.5 wheel for the training step): OUT=$OUT bash scripts/gpu-compact-l2.sh
# Prediction: the 16k pass 0.97–0.99×, DRAM reads of the compact forward's first chunk down by
# about a quarter of C's share; the training step at 16k −0.5 to −1 ms (0.965–0.97× Liger).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
runs=$(mktemp -d)
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 100 bash scripts/gpu-variants.sh 5 \
  "l2-32=$B/flce" "l2-16=$B/flce:FLCE_SM90_COMPACT_L2_MB=16" > "$OUT/variants.md" 2>&1
SHAPES=gemma2 BENCH_ARGS="--iters 5" OUT=$runs/gemma2 timeout 60 bash scripts/gpu-variants.sh 3 \
  "l2-32=$B/flce" "l2-16=$B/flce:FLCE_SM90_COMPACT_L2_MB=16" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"; cat "$OUT/variants.md"
for o in train gemma2; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for mb in 32 16; do
  echo "== FLCE_SM90_COMPACT_L2_MB=$mb" >> "$OUT/ncu.txt"
  FLCE_SM90_COMPACT_L2_MB=$mb timeout 45 ncu --clock-control none -k "regex:^flce_sm90_forward_compact$" -c 3 --csv --metrics $M \
    $B/flce bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 2048 2> /dev/null | grep '^"' | cut -d, -f1,5,13- >> "$OUT/ncu.txt"
  echo "ncu $mb rc=$? at ${SECONDS}s"
done
grep -E "==|duration|dram__bytes_read|hit_rate" "$OUT/ncu.txt" | cut -c1-160
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
for mb in 32 16; do
  FLCE_SM90_COMPACT_L2_MB=$mb PYTHONPATH=/tmp/site timeout 100 python3 benchmarks/train_step.py --tokens 16384 \
    --methods liger,flce@2G --rounds 2 --versus liger --repeats 5 --out /tmp/train-$mb.json > /tmp/train-$mb.log 2>&1
  echo "train $mb rc=$? at ${SECONDS}s"; { echo "== FLCE_SM90_COMPACT_L2_MB=$mb"; cat /tmp/train-$mb.log; } >> "$OUT/train.log"
  grep -A4 "^| tokens" /tmp/train-$mb.log
done
