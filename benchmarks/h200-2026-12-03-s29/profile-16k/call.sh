#!/usr/bin/env bash
# s29 call 1: where the 16k training-step loss (16384, 2048, 128256) spends its time today, by
# budget (2 GB: 3 chunks, 3 GB: 2, 6 GB: 1) — per launch under torch.profiler and sustained under
# flce bench; the training step at 16k against Liger as today's baseline. gpu-bundle = 8472bce.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 120 python3 scripts/profile_kernels.py --shape train16k --launches --top 14 \
  --configs auto/auto/2147483648,auto/auto/3221225472,auto/auto/6442450944 > "$OUT/profile.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"
for mb in 2048 3072 6144; do
  timeout 40 $B/flce bench --shapes 16384,2048,128256 --iters 5 --step-budget-mb $mb >> "$OUT/bench.log" 2>&1
done
echo "bench rc=$? at ${SECONDS}s"; grep -iE "three|step" "$OUT/bench.log" | head -12
timeout 150 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 --versus liger \
  --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -A5 "^| tokens" "$OUT/train.log"
grep -E "^## |^\| " "$OUT/profile.log" | grep -v "^| ---" | head -60
