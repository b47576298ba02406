#!/usr/bin/env bash
# s49 call 4: where "fast" spends its 4-5% over floor3 at Llama 3 with 65,536 tokens, kernel by
# kernel, in 8,192- and 16,384-token chunks (FLCE_STEP_MAX_TOKENS), and why the larger chunks
# (half the f32 dC accumulator's passes) are not faster.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
for mt in 8192 16384; do
  FLCE_STEP_MAX_TOKENS=$mt timeout 140 python3 scripts/profile_kernels.py --shape llama3_n65536 \
    --configs auto/auto/fast --top 14 --steps 2 2>&1 | grep -v Warn | tee "$OUT/profile-65k-$mt.md"
done
