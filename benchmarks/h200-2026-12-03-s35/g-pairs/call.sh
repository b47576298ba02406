#!/usr/bin/env bash
# s35 call 5: the staged G on its L2 grid in pairs (FLCE_SM90_G_CLUSTER=2: C's box multicast to
# two token tiles) — GPU cases, then interleaved timing against the new default; ncu of the new
# default's first G launch at Llama 3 (what is left in G).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
FLCE_SM90_G_CLUSTER=2 timeout 50 $B/gpu-tests --small "(1024,64,8000)" "(129,200,5003)" chunked > "$OUT/tests-pairs.log" 2>&1
echo "tests pairs rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-pairs.log") ok, $(grep -c FAIL "$OUT/tests-pairs.log") FAIL"
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$OUT/var bash scripts/gpu-variants.sh 3 \
  "new=$B/flce" "pairs=$B/flce:FLCE_SM90_G_CLUSTER=2" > "$OUT/variants.md" 2>&1
tail -n 7 "$OUT/variants.md"
tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
timeout 80 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats \
  $B/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > "$OUT/grad-new-details.log" 2>&1
grep -E "Duration|SM Frequency|Elapsed Cycles|Issue Slots Busy|L2 Hit Rate|DRAM Throughput|Grid Size" "$OUT/grad-new-details.log"
