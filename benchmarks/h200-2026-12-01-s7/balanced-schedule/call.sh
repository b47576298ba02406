set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests default $(date -u +%T)"
timeout 150 gpu-bundle/gpu-tests --small > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
timeout 30 gpu-bundle/gpu-tests "past-2^31" >> $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== variants bench $(date -u +%T)"
mkdir -p /tmp/var
OUT=/tmp/var timeout 240 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" \
  "inflight=gpu-bundle/flce:FLCE_SM90_MAINLOOP=inflight=1" "skew2=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=2" \
  "skew2inf=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=2,inflight=1" "skew4inf=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=4,inflight=1" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var
echo "== tests skew2,inflight $(date -u +%T)"
FLCE_SM90_MAINLOOP=skew=2,inflight=1 timeout 130 gpu-bundle/gpu-tests --small > $OUT/gpu-tests-skew2-inflight.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-skew2-inflight.log
echo "== memcheck $(date -u +%T)"
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "(255,507,123)" "(1,64,1000)" "(129,200,5003)" "(257,520,300)" chunked "phases bf16 all" > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head; grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests-skew2-inflight.log | head
grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log
cat $OUT/variants.md
