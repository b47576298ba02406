#!/usr/bin/env bash
# s36 call 6: the binding on the raster-ordered G default (gorder=1) — as s35 call 6:
# test_bad_input.py (CUDA against the reference, torch.compile, CUDA-graph capture and replay,
# bad input in every mode), then test_hf.py (the tiny HF models, "min" and "peak").
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
T=$PWD/$B/python-tests
(cd /tmp && PYTHONPATH=/tmp/site timeout 185 python3 -m pytest -q -p no:cacheprovider $T/test_flce.py $T/test_bad_input.py \
  > $OUT/pytest-flce.log 2>&1; echo "exit $?" >> $OUT/pytest-flce.log)
echo "pytest 1 at ${SECONDS}s"; grep -E "passed|failed|^FAILED|^ERROR|exit" $OUT/pytest-flce.log | tail -n 6
(cd /tmp && PYTHONPATH=/tmp/site timeout 75 python3 -m pytest -q -p no:cacheprovider $T/test_hf.py \
  > $OUT/pytest-hf.log 2>&1; echo "exit $?" >> $OUT/pytest-hf.log)
echo "pytest 2 at ${SECONDS}s"; grep -E "passed|failed|^FAILED|^ERROR|exit" $OUT/pytest-hf.log | tail -n 6
