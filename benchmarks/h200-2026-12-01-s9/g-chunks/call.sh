set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 130 gpu-bundle/gpu-tests --small "2 SMs" bf16 f16 bad-target bad-weights bad-pointers phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
timeout 90 gpu-bundle/gpu-tests "sampled fused" >> $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
if grep -q "FAILED" $OUT/gpu-tests.log; then echo "tests failed: no timing"; grep FAILED $OUT/gpu-tests.log | head; exit 1; fi
echo "== memcheck $(date -u +%T)"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "2 SMs" "bf16 all (257,520,300)" "(1,64,1000)" bad-target > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var2
OUT=/tmp/var2 timeout 200 bash scripts/gpu-variants.sh 3 "old=old-bundle/flce" "new=gpu-bundle/flce" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var2
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head; grep -E "^test.*sampled" $OUT/gpu-tests.log | cut -c1-220
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
tail -8 $OUT/variants.md
