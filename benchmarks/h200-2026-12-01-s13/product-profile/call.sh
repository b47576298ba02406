#!/usr/bin/env bash
# where the product kernel's time goes: per-kernel breakdown (cuBLAS products vs flce's) and ncu of both
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
for v in cublas own; do
  env $([ $v = own ] && echo FLCE_SM90_PRODUCTS=1) timeout 60 python3 scripts/profile_kernels.py --shape llama3 --configs auto/auto/min --top 10 > "$OUT/profile-$v.log" 2>&1
done
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy)
bench=(gpu-bundle/flce bench --shapes llama3 --step-budget-mb 0 --iters 1)
FLCE_SM90_PRODUCTS=1 timeout 150 ncu --clock-control none -k regex:flce_sm90_product -c 2 "${sections[@]}" "${bench[@]}" > "$OUT/ncu-product.log" 2>&1
timeout 150 ncu --clock-control none -k regex:nvjet -c 3 "${sections[@]}" "${bench[@]}" > "$OUT/ncu-cublas.log" 2>&1
for f in "$OUT"/profile-*.log; do echo "== $f"; grep "^|\|^##" "$f" | head -12; done
for f in "$OUT"/ncu-*.log; do echo "== $f"; grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|L2 Hit Rate|DRAM Throughput|Grid Size|Block Size" "$f" | cut -c1-150; done
