#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.host_split.py "$OUT/host_split.py"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
timeout 200 python3 scripts/.host_split.py llama3_n1024 2>&1 | grep -v Warn | tee "$OUT/host_split.log"
