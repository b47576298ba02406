set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 170 gpu-bundle/gpu-tests --small "2 SMs" bf16 f16 bad-target bad-weights bad-pointers two-threads context-restored phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== memcheck $(date -u +%T)"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "2 SMs" "bf16 all (257,520,300)" "bf16 plain (1024,64,8000)" "(1,64,1000)" bad-target > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== bench $(date -u +%T)"
timeout 45 gpu-bundle/flce bench --shapes gemma2,llama3,qwen25 --forward auto --backward auto --step-budget-mb 0 > $OUT/bench.log 2>&1; echo "exit $?" >> $OUT/bench.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 125 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") > $OUT/pytest.log 2>&1
echo "== llama3 sampled fused $(date -u +%T)"
timeout 60 gpu-bundle/gpu-tests "llama3 sampled fused" > $OUT/gpu-tests-llama3.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-llama3.log
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head; grep -E "2 SMs" $OUT/gpu-tests.log | cut -c1-150
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log; tail -2 $OUT/pytest.log; grep -E "^test|^gpu|^exit" $OUT/gpu-tests-llama3.log | cut -c1-200
grep -vE "^\s*$" $OUT/bench.log | tail -8
