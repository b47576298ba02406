#!/usr/bin/env bash
# s36 call 1: the raster-ordered G (gorder=1) as the default build: GPU cases + sanitizers under
# it, interleaved timing against the (slots, splits) grid (gorder=0), ncu of the first G launch.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
OLD=FLCE_SM90_MAINLOOP=gorder=0
timeout 150 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok, $(grep -c FAIL "$OUT/tests.log") FAIL"
{ timeout 70 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 none (1024,64,8000)" "bf16 none (257,520,300)"
  echo "memcheck rc=$?"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)"
  echo "racecheck rc=$?"; } > "$OUT/sanitizers.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizers.log"
v() {  # shapes, bench args, name, rounds
  SHAPES="$1" BENCH_ARGS="--iters 5 --step-budget-mb 0 $2" OUT=$OUT/var-$3 bash scripts/gpu-variants.sh "$4" \
    "order=$B/flce" "grid=$B/flce:$OLD" > "$OUT/v-$3.md" 2>&1
  tail -n 4 "$OUT/v-$3.md"
}
v gemma2,llama3,qwen25 "" plain 3
v 32768,4096,128256 "" 32k 2
v llama3 "--grads de" de 2
cat "$OUT"/v-*.md > "$OUT/variants.md" && rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
timeout 80 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  $B/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > "$OUT/ncu-grad-order.log" 2>&1
grep -E "Duration|SM Frequency|Elapsed Cycles|SM Active Cycles|L2 Hit Rate|DRAM Throughput|Grid Size" "$OUT/ncu-grad-order.log"
echo "total ${SECONDS}s"
