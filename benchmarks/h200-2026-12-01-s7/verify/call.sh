set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=$OUT STEPS="tests pytest memcheck" TEST_ARGS=--small T_PYTEST=170 T_MEMCHECK=120 bash scripts/gpu-verify.sh > $OUT/verify-summary.txt 2>&1
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 40 gpu-bundle/gpu-tests "past-2^31" > $OUT/gpu-tests-past2e31.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-past2e31.log
echo "## forward auto, backward auto" > $OUT/bench.log
timeout 60 gpu-bundle/flce bench --shapes gemma2,llama3,qwen25 --forward auto --backward auto --step-budget-mb 4096 >> $OUT/bench.log 2>&1
timeout 90 ncu --clock-control none -k regex:flce_sm90_grad -s 2 -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  gpu-bundle/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > $OUT/ncu-grad.log 2>&1
cat $OUT/verify-summary.txt | tail -8; grep -E "^FAILED" $OUT/pytest.log | head; tail -2 $OUT/gpu-tests-past2e31.log
grep -E "^\| [a-z]" $OUT/bench.log
grep -E "Duration|Throughput|Issued Warp|No Eligible|Stall|Registers|Grid Size|Waves" $OUT/ncu-grad.log | head -30
