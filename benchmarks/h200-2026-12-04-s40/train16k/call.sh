#!/usr/bin/env bash
# s40 call 3: the 16k training step (issue 11: <= 0.97x Liger's) in four alternating rounds, with
# one profiled step of each method (where the two steps' GPU time differs).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-0.8.5-py3-none-any.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 420 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce --rounds 4 \
  --versus liger --repeats 5 --profile 40 > "$OUT/train16k.log" 2>&1
echo "train rc=$? at ${SECONDS}s"
grep -E "^## profile|^\| 16384 " "$OUT/train16k.log"
echo "total ${SECONDS}s"
