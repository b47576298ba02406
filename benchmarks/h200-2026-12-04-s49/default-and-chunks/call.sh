#!/usr/bin/env bash
# s49 call 2: f16's K-chunked dE by default (pytest on the GPU, fast_precision at the default),
# and the three-product pass's token chunk at 65k / 128k tokens (FLCE_STEP_MAX_TOKENS).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
OUT=$OUT T_PYTEST=300 STEPS="pytest" bash scripts/gpu-verify.sh > "$OUT/verify.log" 2>&1
tail -n 3 "$OUT/pytest.log"
export PYTHONPATH=/tmp/site
timeout 100 python3 benchmarks/fast_precision.py default 2>&1 | grep -v Warn | tee "$OUT/fast_precision.log"
for n in 65536 131072; do
  for mt in 8192 16384 32768; do
    FLCE_STEP_MAX_TOKENS=$mt timeout 150 gpu-bundle/flce bench --shapes $n,4096,128256 --iters 5 \
      --step-budget-mb 40000 2>&1 | sed "s/^/max_tokens $mt: /" | tee -a "$OUT/step_chunks.log"
  done
done
