#!/usr/bin/env bash
# s38 call: the final build (the slice pass's new rests and threshold as defaults) —
# (1) Gemma 2 sampled against f64 with the slice within 1 GB (its head now holds dE's accumulator);
# (2) where the slice's time goes now (profile, Gemma 2, default / 512 MB / 1 GB);
# (3) the training step: Liger, flce.patch's default ("peak"), and flce@512M (a slice there).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 150 $B/gpu-tests "bf16 gemma2 sampled fused" > "$OUT/tests-sampled.log" 2>&1
echo "sampled rc=$? at ${SECONDS}s"; grep -E "\.\.\. |FAIL" "$OUT/tests-sampled.log" | grep -o "ok.*\|FAIL.*" | cut -c1-300
timeout 150 python3 scripts/profile_kernels.py --shape gemma2 --top 16 --gaps 4 \
  --configs "auto/auto/min,auto/auto/536870912,auto/auto/1073741824" > "$OUT/profile-gemma2.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"; grep -E "^## " "$OUT/profile-gemma2.log"
for tok in 16384 8192; do
  timeout 140 python3 benchmarks/train_step.py --tokens $tok --methods liger,flce,flce@512M --rounds 2 \
    --versus liger --repeats 5 >> "$OUT/train.log" 2>&1
  echo "train $tok rc=$? at ${SECONDS}s"
done
grep -E "^\| (8192|16384) " "$OUT/train.log"
echo "total ${SECONDS}s"
