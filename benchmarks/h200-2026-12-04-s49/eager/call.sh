#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.eager_ab.py "$OUT/eager_ab.py"
OUT=$OUT T_PYTEST=200 STEPS="pytest" bash scripts/gpu-verify.sh > "$OUT/verify.log" 2>&1
tail -n 2 "$OUT/pytest.log"
export PYTHONPATH=/tmp/site FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
for v in 0 1 0 1; do
  FLCE_EAGER_OPS=$v timeout 60 python3 scripts/.eager_ab.py 2>&1 | grep -v Warn | tee -a "$OUT/eager_ab.log"
done
