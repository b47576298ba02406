#!/usr/bin/env bash
# s27 call 3 (at 64cc139): the three-product call's status word read from a status-only op queued
# ahead of the pass (9c02d94) instead of in its backward (which waited for the whole pass).
# Checks: the bad-input GPU cases (the status-only call's word = the forward's), pytest of the
# bad-input, status and three-product tests; timing: flce_fast (and the default call) through
# benchmarks/time_call.py, old wheel (old-bundle = 978e276) against new, interleaved, 3 rounds, at
# the Llama 3 sweep's 1k / 4k and the model shapes; the training step at 8k / 16k against Liger.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 60 $B/gpu-tests bad-target > "$OUT/tests.log" 2>&1; echo "gpu-tests rc=$?"; grep -E "^test |gpu:" "$OUT/tests.log" | cut -c1-220
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 100 python3 -m pytest -q -p no:cacheprovider -rs \
  -k "bad or status_only or nan_where or budget" $OLDPWD/$B/python-tests/test_flce.py) > "$OUT/pytest.log" 2>&1
echo "pytest test_flce rc=$?"; tail -n 2 "$OUT/pytest.log"
(cd /tmp && PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -rs \
  $OLDPWD/$B/python-tests/test_fast.py) > "$OUT/pytest-fast.log" 2>&1
echo "pytest test_fast rc=$? at ${SECONDS}s"; tail -n 2 "$OUT/pytest-fast.log"
AB_METHOD=flce_fast AB_SHAPES=llama3_n1024,llama3_n4096,llama3,gemma2 OUT=$OUT/ab-fast timeout 200 bash scripts/gpu-ab-python.sh old-bundle $B 3 > $OUT/ab-fast.md 2>&1
echo "ab fast at ${SECONDS}s"; cat $OUT/ab-fast.md
AB_SHAPES=llama3_n1024,llama3 OUT=$OUT/ab-default timeout 80 bash scripts/gpu-ab-python.sh old-bundle $B 2 > $OUT/ab-default.md 2>&1
echo "ab default at ${SECONDS}s"; cat $OUT/ab-default.md
cat $OUT/ab-fast/ab-python.jsonl $OUT/ab-default/ab-python.jsonl > $OUT/ab-python.jsonl; cat $OUT/ab-*/ab-python.err > $OUT/ab-python.err
rm -rf $OUT/ab-fast $OUT/ab-default
export PYTHONPATH=/tmp/site
timeout 150 python3 benchmarks/train_step.py --tokens 8192,16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out $OUT/train.json > $OUT/train.log 2>&1
echo "train rc=$? at ${SECONDS}s"; tail -n 6 $OUT/train.log
