set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 230 gpu-bundle/gpu-tests --small frozen bf16 f16 f32 "2 SMs" bad-target bad-weights bad-pointers two-threads phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== memcheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 all (2000" "f32 all (2000" "(1100,136" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== frozen-classifier timing $(date -u +%T)"
mkdir -p /tmp/var1
OUT=/tmp/var1 BENCH_ARGS="--grads de --step-budget-mb 0" timeout 200 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" > $OUT/variants-de.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var1
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head -20
grep -E "frozen" $OUT/gpu-tests.log | cut -c1-300
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
tail -8 $OUT/variants-de.md
grep -h "^| " /tmp/var1/var-*-1.log | grep -v "^| shape\|---" | cut -c1-400
