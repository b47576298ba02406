#!/usr/bin/env bash
# s47 call 8: issue 11's end-to-end step on b0367a9 (the one-chunk plan's state in dC): flce.patch's
# default against Liger's patch at 16k (six alternating rounds) and 8k (three)
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-0.8.5-py3-none-any.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 240 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce --rounds 6 \
  --versus liger --repeats 5 > "$OUT/train16k.log" 2>&1
echo "train16k rc=$? at ${SECONDS}s"
timeout 110 python3 benchmarks/train_step.py --tokens 8192 --methods liger,flce --rounds 3 \
  --versus liger --repeats 5 > "$OUT/train8k.log" 2>&1
echo "train8k rc=$? at ${SECONDS}s"
grep -hE "^\| (16384|8192) " "$OUT/train16k.log" "$OUT/train8k.log"
echo "total ${SECONDS}s"
