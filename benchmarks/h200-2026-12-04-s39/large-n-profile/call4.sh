#!/usr/bin/env bash
# s39 call 4: ncu of one flce_sm90_grad launch at Llama 3 65k (164 ms over 169 launches against the
# forward's 102 ms for the same product) and at 8k.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in llama3_n65536 llama3; do
  PYTHONPATH=/tmp/site timeout 110 ncu --clock-control none -k regex:flce_sm90_grad --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats \
    python3 scripts/profile_kernels.py --shape $s --steps 1 --top 3 --configs "auto/auto/min" > "$OUT/ncu-grad-$s.log" 2>&1
  echo "ncu $s rc=$? at ${SECONDS}s"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|Grid Size|Block Size|Registers Per|Achieved Occupancy|Waves Per SM|Eligible Warps|No Eligible" "$OUT/ncu-grad-$s.log" | head -16
done
echo "total ${SECONDS}s"
