#!/usr/bin/env bash
# s50 call 1: where the timed step's milliseconds go beyond its kernels (benchmarks/step_gaps.py)
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt"
timeout 500 python3 benchmarks/step_gaps.py --shapes gemma2,llama3,qwen25 \
  --methods flce_fast,flce_fast_nocheck,flce,flce_nocheck,compile --steps 7 2>&1 | grep -v -i warn | tee "$OUT/step_gaps.log"
