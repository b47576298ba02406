#!/usr/bin/env bash
# s33 call 2: where the compact forward's time goes at the 16k training step's loss shape
# (16384, 2048, 128256; the three-product pass at 2 GB, its first 6144-token chunk): warp-stall
# samples by SASS instruction for the default compact kernel (fold in registers), the staged one
# (FLCE_SM90_MAINLOOP=fold=1) and the plain staged forward of the same shape.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
S=16384,2048,128256
prof() {  # name kernel-regex step-mb [env]
  env ${4:-X=1} timeout 150 ncu --clock-control none -k "regex:$2" -c 1 --section WarpStateStats --section SpeedOfLight \
    --section SourceCounters --page source --csv --print-source sass \
    $B/flce bench --shapes $S --forward auto --backward auto --step-budget-mb $3 > /tmp/$1.csv 2>&1
  echo "$1 rc=$? at ${SECONDS}s"
  gzip -c /tmp/$1.csv > "$OUT/$1-source.csv.gz"
  env ${4:-X=1} timeout 100 ncu --clock-control none -k "regex:$2" -c 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $B/flce bench --shapes $S --forward auto --backward auto --step-budget-mb $3 > "$OUT/$1-details.log" 2>&1
}
prof compact-default '^flce_sm90_forward_compact$' 2048
prof compact-staged '^flce_sm90_forward_compact$' 2048 FLCE_SM90_MAINLOOP=fold=1
prof plain-staged '^flce_sm90_forward$' 0
for f in compact-default compact-staged plain-staged; do
  echo "== $f"; grep -E "Duration|Local Memory Spilling Requests  |Issue Slots Busy|Warp Cycles Per Issued" "$OUT/$f-details.log"
done
