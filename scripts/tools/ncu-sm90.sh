#!/usr/bin/env bash
# ncu of one sm90 kernel launch (the forward or a backward G chunk) beside cuBLAS's first GEMM of
# the same `flce bench` run, with the sections that split a kernel's time between its main loop,
# its epilogue and memory: pipe utilisation (ComputeWorkloadAnalysis), stall reasons
# (WarpStateStats), L2 / DRAM (MemoryWorkloadAnalysis), and with SOURCE=1 the warp-state samples
# by source line (SourceCounters; the kernels are compiled with -lineinfo). Run on the GPU machine
# from the repository root after scripts/gpu/prepare.sh (with gpu-bundle there):
#   OUT=$OUT SHAPE=llama3 KERNEL=forward bash scripts/tools/ncu-sm90.sh
#   OUT=$OUT SHAPE=llama3 KERNEL=grad SOURCE=1 bash scripts/tools/ncu-sm90.sh
# FLCE names another flce binary (default gpu-bundle/flce); NAME is added to the log names and
# CUBLAS=0 skips the cuBLAS profile (to profile two binaries of one bundle in one call). BUDGET_MB
# (default 0) is the bench's three-product budget: the compact forward runs only with one, e.g.
#   OUT=$OUT SHAPE=llama3 KERNEL=forward_compact BUDGET_MB=4096 SOURCE=1 CUBLAS=0 bash scripts/tools/ncu-sm90.sh
# Writes $OUT/ncu-$KERNEL-$TAG.log and $OUT/ncu-cublas-$TAG.log (TAG: SHAPE with x for commas, then NAME) and prints their headline rows.
set -uo pipefail
OUT=${OUT:-gpu-logs}
SHAPE=${SHAPE:-llama3}
KERNEL=${KERNEL:-forward}
TAG=${SHAPE//,/x}${NAME:+-$NAME}  # file names without commas (the device tool does not return those)
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section LaunchStats)
[ "${SOURCE:-0}" = 1 ] && sections+=(--section SourceCounters)
bench=("${FLCE:-gpu-bundle/flce}" bench --shapes "$SHAPE" --forward auto --backward auto --workspace-budget-mb "${BUDGET_MB:-0}")
timeout "${T_NCU:-120}" ncu --clock-control none -k "regex:flce_sm90_$KERNEL" -c 1 "${sections[@]}" "${bench[@]}" \
  > "$OUT/ncu-$KERNEL-$TAG.log" 2>&1
# cuBLAS's GEMM kernels (nvjet on CUDA 13, sm90_xmma / cutlass names before): the first launch
[ "${CUBLAS:-1}" = 0 ] || timeout "${T_NCU:-120}" ncu --clock-control none -k 'regex:nvjet|xmma|cutlass|gemm' -c 1 "${sections[@]}" "${bench[@]}" \
  > "$OUT/ncu-cublas-$TAG.log" 2>&1
for f in "$OUT/ncu-$KERNEL-$TAG.log" "$OUT/ncu-cublas-$TAG.log"; do
  [ -f "$f" ] || continue
  echo "== $f"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp Per Scheduler|L2 Cache Throughput|L2 Hit Rate|DRAM Throughput|Grid Size|Registers Per" "$f" | head -16
  grep -E "^\s+(Tensor|TC|HMMA|GMMA|Shared Pipe|Uniform)" "$f" | head -6
done
