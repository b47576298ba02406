set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests (all knobs) $(date -u +%T)"
FLCE_SM90_MAINLOOP=gtarget=1,gexp2=1,fexp2=1 timeout 120 gpu-bundle/gpu-tests --small "2 SMs" bf16 f16 bad-target bad-weights > $OUT/gpu-tests-knobs.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-knobs.log
if grep -q "FAILED" $OUT/gpu-tests-knobs.log; then echo "knob tests failed"; grep FAILED $OUT/gpu-tests-knobs.log | head; fi
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var1 /tmp/var32
OUT=/tmp/var1 timeout 230 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" "gt=gpu-bundle/flce:FLCE_SM90_MAINLOOP=gtarget=1" \
  "gtx=gpu-bundle/flce:FLCE_SM90_MAINLOOP=gtarget=1,gexp2=1" "all=gpu-bundle/flce:FLCE_SM90_MAINLOOP=gtarget=1,gexp2=1,fexp2=1" > $OUT/variants.md 2>&1
echo "== 32k grid $(date -u +%T)"
OUT=/tmp/var32 SHAPES=32768,4096,128256 timeout 150 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" "old=gpu-bundle/flce:FLCE_SM90_L2_MB=0" > $OUT/variants-32k.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var1 var32
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit" $OUT/gpu-tests-knobs.log
tail -14 $OUT/variants.md
tail -4 $OUT/variants-32k.md
