#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.g_scale.py "$OUT/g_scale.py"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout 280 python3 scripts/.g_scale.py 2>&1 | grep -v Warn | tee "$OUT/g_scale.log"
for mt in 4096 8192 4096 8192; do
  FLCE_STEP_MAX_TOKENS=$mt timeout 100 gpu-bundle/flce bench --shapes 65536,4096,128256 --iters 5 \
    --step-budget-mb 40000 2>&1 | grep "^| 65536" | head -1 | sed "s/^/max_tokens $mt: /" | tee -a "$OUT/step_chunks.log"
done
