#!/usr/bin/env bash
# s19 call 1: test_fast.py on CUDA (no-copy, no-grad, three_product_plan), then the step-chunk caps.
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
export FLCE_CACHE_DIR=$(mktemp -d)
(cd /tmp && timeout 150 python3 -m pytest -q -p no:cacheprovider -rs $OLDPWD/gpu-bundle/python-tests/test_fast.py) > $OUT/test_fast.log 2>&1
echo "test_fast rc=$?"; tail -n 25 $OUT/test_fast.log
OUT=$OUT/chunks timeout 420 bash scripts/gpu-step-chunks.sh
echo "chunks rc=$?"
