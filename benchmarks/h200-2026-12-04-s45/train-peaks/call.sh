#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call5.py "$OUT/call5.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
pip install -q --no-deps --target /tmp/site gpu-bundle/wheels/flce-*.whl .whl/small/liger_kernel-0.8.5-py3-none-any.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 200 python3 scripts/.call5.py > "$OUT/peaks.log" 2>&1
echo "rc=$? ${SECONDS}s"; cat "$OUT/peaks.log" | grep -v Warning | tail -60
