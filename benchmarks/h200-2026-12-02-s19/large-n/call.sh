#!/usr/bin/env bash
# s19 call 3: (a) what is alive at flce_fast's peak at N 1k (memory snapshot); (b) the large-N
# forward: vocabulary splits up to 16 (flce-s16: cap by_memory.max(16)) and a 44 MB L2 budget
# against today's grid at 65k tokens, timed interleaved, then ncu of the s16 forward.
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 100 python3 scripts/.diag_peak.py > $OUT/diag_peak.log 2>&1; echo "diag rc=$?"; cat $OUT/diag_peak.log | cut -c1-400
OUT=$OUT/v65k SHAPES=65536,4096,128256 BENCH_ARGS="--step-budget-mb 0 --iters 5" timeout 300 bash scripts/gpu-variants.sh 2 \
  "base=gpu-bundle/flce" "s16=gpu-bundle/flce-s16" "s16l2=gpu-bundle/flce-s16:FLCE_SM90_L2_MB=44" "base_l2=gpu-bundle/flce:FLCE_SM90_L2_MB=44" > $OUT/variants65k.md 2>&1
echo "variants rc=$?"; grep -v "^|---" $OUT/variants65k.md | tail -6
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats)
for v in "s16:" "s16l2:FLCE_SM90_L2_MB=44"; do
  name=${v%%:*}; env=${v#*:}
  env $env timeout 90 ncu --clock-control none -k "regex:flce_sm90_forward" -c 1 "${sections[@]}" gpu-bundle/flce-s16 bench --shapes 65536,4096,128256 --iters 2 --step-budget-mb 0 > $OUT/ncu-fwd-$name.log 2>&1
  echo "== $name"; grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|L2 Hit Rate|DRAM Throughput" $OUT/ncu-fwd-$name.log | head -8
done
