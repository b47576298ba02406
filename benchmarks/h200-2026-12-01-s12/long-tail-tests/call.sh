set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 200 gpu-bundle/gpu-tests --small bf16 f16 f32 "2 SMs" bad-target bad-weights bad-pointers two-threads phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== sampled 128k $(date -u +%T)"
timeout 110 gpu-bundle/gpu-tests "llama3-128k sampled fused" > $OUT/gpu-tests-128k.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-128k.log
echo "== memcheck $(date -u +%T)"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 all (3000,64,4000)" "bf16 all (5000,64,3000)" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head
grep -E "^gpu:|^exit|FAILED|^test|ok" $OUT/gpu-tests-128k.log | cut -c1-250 | tail -5
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
