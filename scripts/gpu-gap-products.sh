#!/usr/bin/env bash
# Issue 10's gap to floor4, product by product, in one device call (~3 min; carry gpu-bundle,
# built by scripts/gpu-prepare.sh): scripts/profile_kernels.py --by-product at the model shapes,
# the training step's loss and Llama 3 at 65k — each step's forward, G, dE and dC against
# cuBLAS's product of the same shape timed in the same process (perf-notes v48 did it by hand at
# 65k: G 1.72x, dE 1.25x, the forward and dC at cuBLAS's rate). The default budget and 1 GB.
# STEPS (default 1) steps back to back a config, averaged. Keep 1 to compare with cuBLAS's
# products, which are timed on their own: three steps back to back ran every flce kernel 4-9%
# slower (the clock under sustained load; benchmarks/h200-2026-12-04-s41/by-product/) and read
# 1.066 against 1.002 floor4 at Llama 3 in the same minute.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in gemma2 llama3 qwen25 train16k llama3_n65536; do
  PYTHONPATH=/tmp/site timeout 120 python3 scripts/profile_kernels.py --shape $s --steps "${STEPS:-1}" --top 10 --gaps 3 \
    --by-product --configs "auto/auto/min,auto/auto/1073741824" > "$OUT/products-$s.log" 2>&1
  echo "== $s rc=$? at ${SECONDS}s"
  grep -E "^## |^\| (forward|G|dE|dC|own|other|step) " "$OUT/products-$s.log"
done
echo "total ${SECONDS}s"
