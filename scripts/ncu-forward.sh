#!/usr/bin/env bash
# ncu of the sm90 forward kernel against cuBLAS's logits GEMM of the same shape, one launch each,
# with the sections that split a kernel's time between its main loop and its idle tensor cores
# (pipe utilisation in ComputeWorkloadAnalysis, stall reasons in WarpStateStats). Run on the GPU
# machine from the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT SHAPE=llama3 bash scripts/ncu-forward.sh
# Writes $OUT/ncu-forward-$SHAPE.log and $OUT/ncu-cublas-$SHAPE.log and prints their headline rows.
set -uo pipefail
OUT=${OUT:-gpu-logs}
SHAPE=${SHAPE:-llama3}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section LaunchStats)
bench=(gpu-bundle/flce bench --shapes "$SHAPE" --forward auto --backward auto --step-budget-mb 0)
timeout "${T_NCU:-120}" ncu --clock-control none -k regex:flce_sm90_forward -c 1 "${sections[@]}" "${bench[@]}" \
  > "$OUT/ncu-forward-$SHAPE.log" 2>&1
# cuBLAS's GEMM kernels (nvjet on CUDA 13, sm90_xmma / cutlass names before): the first launch
timeout "${T_NCU:-120}" ncu --clock-control none -k 'regex:nvjet|xmma|cutlass|gemm' -c 1 "${sections[@]}" "${bench[@]}" \
  > "$OUT/ncu-cublas-$SHAPE.log" 2>&1
for f in "$OUT/ncu-forward-$SHAPE.log" "$OUT/ncu-cublas-$SHAPE.log"; do
  echo "== $f"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp Per Scheduler|L2 Cache Throughput|DRAM Throughput|Grid Size|Registers Per" "$f" | head -14
  grep -E "^\s+(Tensor|TC|HMMA|GMMA|Shared Pipe|Uniform)" "$f" | head -6
done
