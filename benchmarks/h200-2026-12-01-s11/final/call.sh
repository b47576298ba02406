set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== timing 8k old/new $(date -u +%T)"
mkdir -p /tmp/v8 /tmp/v32
OUT=/tmp/v8 BENCH_ARGS="--step-budget-mb 0" timeout 100 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" > $OUT/variants-8k.md 2>&1
OUT=/tmp/v32 SHAPES=32768,4096,128256 BENCH_ARGS="--step-budget-mb 0" timeout 40 bash scripts/gpu-variants.sh 1 "new=gpu-bundle/flce" > $OUT/variants-32k.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp v8 v32
echo "== tests $(date -u +%T)"
timeout 225 gpu-bundle/gpu-tests --small bf16 f16 f32 "2 SMs" bad-target bad-weights bad-pointers two-threads phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== sampled $(date -u +%T)"
timeout 50 gpu-bundle/gpu-tests "llama3 sampled fused" > $OUT/gpu-tests-sampled.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-sampled.log
echo "== memcheck $(date -u +%T)"
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 plain (3000" "bf16 plain (300,128" "bf16 all (2000" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 130 python3 -m pytest -q -x -p no:cacheprovider $OLDPWD/gpu-bundle/python-tests > $OUT/pytest.log 2>&1; echo "exit $?" >> $OUT/pytest.log)
echo "== done $(date -u +%T)"
tail -8 $OUT/variants-8k.md
grep -h "^| " /tmp/v8/var-new-1.log /tmp/v32/var-new-1.log | grep -v "^| shape\|---" | cut -c1-330 | sort -u
tail -3 $OUT/variants-32k.md
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head
grep -E "^gpu:|^exit|FAILED|^test" $OUT/gpu-tests-sampled.log | cut -c1-250
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
tail -3 $OUT/pytest.log
