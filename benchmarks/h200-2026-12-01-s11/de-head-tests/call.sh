set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 240 gpu-bundle/gpu-tests --small bf16 f16 f32 "2 SMs" bad-target bad-weights bad-pointers two-threads phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== tests with FLCE_DE_HEAD=always $(date -u +%T)"
FLCE_DE_HEAD=always timeout 120 gpu-bundle/gpu-tests --small bf16 > $OUT/gpu-tests-head-always.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-head-always.log
echo "== sampled with FLCE_DE_HEAD=always $(date -u +%T)"
FLCE_DE_HEAD=always timeout 90 gpu-bundle/gpu-tests "llama3 sampled fused" "gemma2 sampled fused" > $OUT/gpu-tests-sampled-head.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-sampled-head.log
echo "== memcheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "de-head" "bf16 plain (300,128" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head -20
grep -E "de-head|frozen" $OUT/gpu-tests.log | grep "^test" | cut -c1-250
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests-head-always.log | head
grep -E "^gpu:|^exit|FAILED|^test" $OUT/gpu-tests-sampled-head.log | cut -c1-250 | head
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
