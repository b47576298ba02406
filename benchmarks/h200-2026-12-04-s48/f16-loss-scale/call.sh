#!/usr/bin/env bash
# s48 call 10: loss_scale on the GPU — the binding's whole pytest (scripts/gpu-pytest.sh, 6 xdist
# workers), then scripts/.call5.py (as f16_loss_scale.py): f16 with AMP's scale, time and errors
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call5.py "$OUT/f16_loss_scale.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
timeout 260 bash gpu-bundle/scripts/gpu-pytest.sh > "$OUT/pytest.log" 2>&1; echo "exit $?" >> "$OUT/pytest.log"
tail -n 3 "$OUT/pytest.log"
timeout 200 python3 scripts/.call5.py 2>&1 | grep -v Warn | tee "$OUT/f16_loss_scale.log"
