set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 170 gpu-bundle/gpu-tests --small bf16 f16 f32 "2 SMs" bad-target bad-weights bad-pointers two-threads phases > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
timeout 90 gpu-bundle/gpu-tests "sampled fused" >> $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
if grep -q "FAILED" $OUT/gpu-tests.log; then echo "tests failed: no timing"; grep FAILED $OUT/gpu-tests.log | head; exit 1; fi
echo "== memcheck $(date -u +%T)"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" "bf16 all (129,200,5003)" "f32 plain (129,200,5003)" "2 SMs" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== variants $(date -u +%T)"
mkdir -p /tmp/v3a /tmp/v3b /tmp/v3c
OUT=/tmp/v3a timeout 100 bash scripts/gpu-variants.sh 3 "off=gpu-bundle/flce:FLCE_DC_SCRATCH=0" "on=gpu-bundle/flce" > $OUT/variants.md 2>&1
OUT=/tmp/v3b SHAPES=16384,2048,128256 timeout 60 bash scripts/gpu-variants.sh 2 "off=gpu-bundle/flce:FLCE_DC_SCRATCH=0" "on=gpu-bundle/flce" > $OUT/variants-d2048.md 2>&1
OUT=/tmp/v3c SHAPES=32768,4096,128256 timeout 110 bash scripts/gpu-variants.sh 2 "off=gpu-bundle/flce:FLCE_DC_SCRATCH=0" "on=gpu-bundle/flce" > $OUT/variants-32k.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp v3a v3b v3c
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head; grep -E "^test.*sampled" $OUT/gpu-tests.log | cut -c1-200
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
cat $OUT/variants.md $OUT/variants-d2048.md $OUT/variants-32k.md | grep "^|"
