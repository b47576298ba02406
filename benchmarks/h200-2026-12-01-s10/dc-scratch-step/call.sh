set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== pytest $(date -u +%T)"
(cd /tmp && PYTHONPATH=/tmp/site timeout 140 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") > $OUT/pytest.log 2>&1
echo "== train step $(date -u +%T)"
PYTHONPATH=/tmp/site:/tmp/peers timeout 110 python3 benchmarks/train_step.py --tokens 16384 --repeats 5 \
  --methods flce,flce@2G,liger --out $OUT/train_step.json > $OUT/train_step.log 2>&1; echo "exit $?" >> $OUT/train_step.log
echo "== 128k $(date -u +%T)"
mkdir -p /tmp/v4
OUT=/tmp/v4 SHAPES=131072,4096,128256 timeout 150 bash scripts/gpu-variants.sh 1 "off=gpu-bundle/flce:FLCE_DC_SCRATCH=0" "on=gpu-bundle/flce" > $OUT/variants-128k.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp v4
echo "== done $(date -u +%T)"
tail -3 $OUT/pytest.log
tail -7 $OUT/train_step.log
grep "^|" $OUT/variants-128k.md; grep -h "mem\|MB" /tmp/v4/*.log | head -6
