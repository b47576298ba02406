#!/usr/bin/env bash
# s33 call 1: (a) workspace_budget="peak" in the training step beside 2 GB, the default and Liger
# (16k, then 8k); (b) where the compact forward's time goes: ncu stall profile by source line
# (Llama 3, the three-product pass's kernel), and the 16k step's loss kernel by kernel.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
for tok in 16384 8192; do
  timeout 170 python3 benchmarks/train_step.py --tokens $tok --methods liger,flce@peak,flce@2G,flce --rounds 2 \
    --versus liger --repeats 5 --out /tmp/train-$tok.json >> "$OUT/train.log" 2>&1
  echo "train $tok rc=$? at ${SECONDS}s"
done
OUT=$OUT SHAPE=llama3 KERNEL=forward_compact STEP_MB=4096 SOURCE=1 CUBLAS=0 T_NCU=150 bash scripts/ncu-sm90.sh > "$OUT/ncu-summary.txt" 2>&1
echo "ncu rc=$? at ${SECONDS}s"
timeout 60 python3 $B/scripts/profile_kernels.py --shape train16k --configs "auto/auto/2147483648" > "$OUT/profile-train16k.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"
cat "$OUT/ncu-summary.txt" | head -30
grep -E "^\| (8192|16384)|^\| tokens|speedup|×" "$OUT/train.log" | head -30
