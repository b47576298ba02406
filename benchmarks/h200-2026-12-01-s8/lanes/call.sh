set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== lanes tests $(date -u +%T)"
FLCE_SM90_MAINLOOP=lanes=1 timeout 150 gpu-bundle/gpu-tests --small > $OUT/gpu-tests-lanes.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-lanes.log
FLCE_SM90_MAINLOOP=lanes=1 timeout 60 gpu-bundle/gpu-tests "past-2^31" >> $OUT/gpu-tests-lanes.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-lanes.log
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var
OUT=/tmp/var timeout 150 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" "lanes=gpu-bundle/flce:FLCE_SM90_MAINLOOP=lanes=1" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var
echo "== ncu $(date -u +%T)"
mkdir -p /tmp/ncu
OUT=/tmp/ncu SHAPE=llama3 T_NCU=60 bash scripts/ncu-forward.sh > $OUT/ncu-summary.txt 2>&1
mkdir -p /tmp/ncul
FLCE_SM90_MAINLOOP=lanes=1 timeout 60 ncu --clock-control none -k regex:flce_sm90_forward -c 1 --section SpeedOfLight --section LaunchStats \
  gpu-bundle/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > /tmp/ncu/ncu-forward-lanes-llama3.log 2>&1
grep -E "Duration|Grid Size|Compute \(SM\)" /tmp/ncu/ncu-forward-lanes-llama3.log >> $OUT/ncu-summary.txt
tar czf $OUT/ncu-logs.tgz -C /tmp ncu
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED|failed" $OUT/gpu-tests-lanes.log | head
cat $OUT/variants.md | tail -12
cat $OUT/ncu-summary.txt | head -40
