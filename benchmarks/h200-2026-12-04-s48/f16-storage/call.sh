#!/usr/bin/env bash
# s48 call 11: f16 with loss_scale, compact q against f32 logits (scripts/.call6.py as f16_storage.py)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call6.py "$OUT/f16_storage.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
timeout 150 python3 scripts/.call6.py 2>&1 | grep -v Warn | tee "$OUT/f16_storage.log"
FLCE_STEP_LOGITS=f32 timeout 150 python3 scripts/.call6.py 2>&1 | grep -v Warn | tee -a "$OUT/f16_storage.log"
