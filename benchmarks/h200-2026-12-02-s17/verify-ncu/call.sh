#!/usr/bin/env bash
# s17 call 4: main d2ab65f (gpu-bundle) — Llama 3 sampled (compact with staged q stores at a model
# shape) and the wheel's test_fast.py; then (issue 10) ncu of the clustered own product launches,
# warp stalls by SASS line (SOURCE=1 CLUSTER=2 TIMING=0 scripts/gpu-product-ncu.sh).
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs4; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
echo "== sampled $(date -u +%T)"
timeout 120 gpu-bundle/gpu-tests "bf16 llama3 sampled" > $L/gpu-tests-sampled.log 2>&1
echo "exit $?" >> $L/gpu-tests-sampled.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -x "$OLDPWD/gpu-bundle/python-tests/test_fast.py") > $L/pytest-fast.log 2>&1
echo "exit $?" >> $L/pytest-fast.log
tar czf "$OUT/logs4.tgz" -C /tmp logs4
mkdir -p $OUT/ncu
OUT=$OUT/ncu SOURCE=1 CLUSTER=2 TIMING=0 timeout 300 bash scripts/gpu-product-ncu.sh > $L/ncu.out 2>&1
echo "sampled: $(grep -c '\.\.\. ok' $L/gpu-tests-sampled.log) ok, $(grep -c 'FAILED' $L/gpu-tests-sampled.log) failed; $(grep -h '^exit\|^gpu:' $L/gpu-tests-sampled.log | tr '\n' ' ')"
grep -h "FAILED" $L/gpu-tests-sampled.log | head -3 | cut -c1-300
grep -h "three-product" $L/gpu-tests-sampled.log | cut -c1-400
tail -3 $L/pytest-fast.log
tail -5 $L/ncu.out
