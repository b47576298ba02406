set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== pytest $(date -u +%T)"
(cd /tmp && PYTHONPATH=/tmp/site timeout 140 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") > $OUT/pytest.log 2>&1
echo "== train step $(date -u +%T)"
PYTHONPATH=/tmp/site:/tmp/peers timeout 300 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods flce,flce@peak,flce@2G,liger --out $OUT/train_step.json > $OUT/train_step.log 2>&1; echo "exit $?" >> $OUT/train_step.log
echo "== done $(date -u +%T)"
tail -3 $OUT/pytest.log; grep -E "peak" $OUT/pytest.log | head -5
tail -16 $OUT/train_step.log
