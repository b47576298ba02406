set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== de-head tests $(date -u +%T)"
timeout 100 gpu-bundle/gpu-tests --small de-head > $OUT/gpu-tests-de-head.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-de-head.log
echo "== Llama 3 32k old/new $(date -u +%T)"
mkdir -p /tmp/v32 /tmp/v8
OUT=/tmp/v32 SHAPES=32768,4096,128256 BENCH_ARGS="--step-budget-mb 0" timeout 150 bash scripts/gpu-variants.sh 1 "old=old-bundle/flce" "new=gpu-bundle/flce" > $OUT/variants-32k.md 2>&1
echo "== 8k head always $(date -u +%T)"
OUT=/tmp/v8 BENCH_ARGS="--step-budget-mb 0" timeout 150 bash scripts/gpu-variants.sh 2 "new=gpu-bundle/flce" "head=gpu-bundle/flce:FLCE_DE_HEAD=always" > $OUT/variants-8k-head.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp v32 v8
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 170 python3 -m pytest -q -p no:cacheprovider $OLDPWD/gpu-bundle/python-tests > $OUT/pytest.log 2>&1; echo "exit $?" >> $OUT/pytest.log)
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED|^test" $OUT/gpu-tests-de-head.log | cut -c1-250
tail -4 $OUT/variants-32k.md
grep -h "^| " /tmp/v32/var-*-1.log | grep -v "^| shape\|---" | cut -c1-330 | sort -u
tail -8 $OUT/variants-8k-head.md
tail -3 $OUT/pytest.log
