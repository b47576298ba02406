#!/usr/bin/env bash
# s37 call 5: where the vocabulary-slice pass's fixed cost goes — per-kernel GPU time of one
# forward+backward (scripts/profile_kernels.py, torch.profiler) at Gemma 2: the default ("min"),
# the slice at 384 MB (head 12,544 rows: 1.048x the default in call 4) and at 1 GB.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 200 python3 scripts/profile_kernels.py --shape gemma2 --top 24 --gaps 4 \
  --configs "auto/auto/min,auto/auto/402653184,auto/auto/1073741824" > "$OUT/profile-gemma2.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"
grep -vE "^\s*$" "$OUT/profile-gemma2.log" | cut -c1-150 | tail -n 95
