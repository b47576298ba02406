set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 165 gpu-bundle/gpu-tests --small bf16 f16 frozen de-head bad-target bad-pointers > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 105 python3 -m pytest -q -x -p no:cacheprovider $OLDPWD/gpu-bundle/python-tests > $OUT/pytest.log 2>&1; echo "exit $?" >> $OUT/pytest.log)
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head
tail -3 $OUT/pytest.log
