set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 160 gpu-bundle/gpu-tests --small > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
timeout 70 gpu-bundle/gpu-tests "sampled fused" "past-2^31" >> $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
if grep -q "FAILED" $OUT/gpu-tests.log; then echo "tests failed: no timing"; grep FAILED $OUT/gpu-tests.log | head; exit 1; fi
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var4
OUT=/tmp/var4 timeout 220 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "l2_0=gpu-bundle/flce:FLCE_SM90_L2_MB=0" \
  "l2_32=gpu-bundle/flce" "l2_24=gpu-bundle/flce:FLCE_SM90_L2_MB=24" "l2_48=gpu-bundle/flce:FLCE_SM90_L2_MB=48" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var4
echo "== ncu $(date -u +%T)"
mkdir -p /tmp/ncu4
S=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section ComputeWorkloadAnalysis)
B=(gpu-bundle/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0)
timeout 50 ncu --clock-control none -k regex:flce_sm90_forward -c 1 "${S[@]}" "${B[@]}" > /tmp/ncu4/ncu-forward-llama3.log 2>&1
timeout 50 ncu --clock-control none -k regex:flce_sm90_grad -c 1 "${S[@]}" "${B[@]}" > /tmp/ncu4/ncu-grad-llama3.log 2>&1
FLCE_SM90_L2_MB=0 timeout 50 ncu --clock-control none -k regex:flce_sm90_grad -c 1 "${S[@]}" "${B[@]}" > /tmp/ncu4/ncu-grad-l2_0-llama3.log 2>&1
for f in /tmp/ncu4/*.log; do echo "== $f"; grep -E "^  [a-z_0-9]+ \(|Duration|DRAM Throughput|L2 Hit Rate|Compute \(SM\) Throughput|SM Frequency|Grid Size" $f | head -9; done > $OUT/ncu-summary.txt
tar czf $OUT/ncu-logs.tgz -C /tmp ncu4
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED|2 SMs" $OUT/gpu-tests.log | head -20
cat $OUT/variants.md | tail -18
cat $OUT/ncu-summary.txt
