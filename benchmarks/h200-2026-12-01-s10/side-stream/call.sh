set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 130 gpu-bundle/gpu-tests --small side-stream two-threads bad-target bf16 "2 SMs" phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
if grep -q "FAILED" $OUT/gpu-tests.log; then echo "tests failed: no timing"; grep FAILED $OUT/gpu-tests.log | head; exit 1; fi
echo "== variants $(date -u +%T)"
mkdir -p /tmp/v2a /tmp/v2b
OUT=/tmp/v2a timeout 110 bash scripts/gpu-variants.sh 3 "one=gpu-bundle/flce:FLCE_BWD_STREAMS=1" "two=gpu-bundle/flce" > $OUT/variants.md 2>&1
OUT=/tmp/v2b SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 80 bash scripts/gpu-variants.sh 2 "one=gpu-bundle/flce:FLCE_BWD_STREAMS=1" "two=gpu-bundle/flce" > $OUT/variants-d2048.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp v2a v2b
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== pytest $(date -u +%T)"
(cd /tmp && PYTHONPATH=/tmp/site timeout 140 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") > $OUT/pytest.log 2>&1
echo "== train step $(date -u +%T)"
PYTHONPATH=/tmp/site:/tmp/peers timeout 100 python3 benchmarks/train_step.py --tokens 16384 --repeats 5 \
  --methods flce,flce@2G,liger --out $OUT/train_step.json > $OUT/train_step.log 2>&1; echo "exit $?" >> $OUT/train_step.log
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED|side-stream" $OUT/gpu-tests.log | cut -c1-300 | head
cat $OUT/variants.md $OUT/variants-d2048.md | grep "^|"
tail -3 $OUT/pytest.log
tail -8 $OUT/train_step.log
