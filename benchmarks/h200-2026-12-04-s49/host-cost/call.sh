#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp benchmarks/host_cost.py "$OUT/"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
timeout 280 python3 benchmarks/host_cost.py --shapes llama3_n1024,gemma2 2>&1 | grep -v Warn | tee "$OUT/host_cost.log"
