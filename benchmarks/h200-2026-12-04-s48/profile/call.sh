#!/usr/bin/env bash
# s48 call 7: flce "fast" and torch.compile kernel by kernel at Gemma 2 / Llama 3 (scripts/.call3.py as profile.py)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call3.py "$OUT/profile.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 400 python3 scripts/.call3.py 2>&1 | grep -v Warning | tee "$OUT/profile.log"
