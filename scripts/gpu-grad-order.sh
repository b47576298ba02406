#!/usr/bin/env bash
# The G kernel's tiles in a raster order over a one-wave grid (FLCE_SM90_MAINLOOP gorder=1,
# kernels/sm90/grad.cu SM90_GRAD_ORDER; built 2026-12-03, not yet run: docs/perf-notes.md v44)
# against the default (slots, splits) grid within 32 MB of L2, in one device call from the
# repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-grad-order.sh
# GPU cases and compute-sanitizer under the variant, then interleaved timing at the model shapes
# (the default four-product call), Llama 3 at 32k tokens and dE only, and ncu of the first G
# launch at Llama 3 under it (the default's: benchmarks/h200-2026-12-03-s35/g-pairs/). Prediction:
# the static grid's longest blocks (504 / 252 / 299 tile steps against 491 / 248 / 294 balanced
# at Gemma 2 / Llama 3 / Qwen 2.5, plan arithmetic) — fwd+bwd −0.4 to −0.8% if the raster
# groups keep the L2 hit rate (76% now).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
B=gpu-bundle
V=FLCE_SM90_MAINLOOP=gorder=1
env $V timeout 150 $B/gpu-tests --small > "$OUT/tests-order.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-order.log") ok, $(grep -c FAIL "$OUT/tests-order.log") FAIL"
{ env $V timeout 60 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 none (1024,64,8000)" "bf16 none (257,520,300)"
  echo "memcheck rc=$?"
  env $V timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)"
  echo "racecheck rc=$?"; } > "$OUT/sanitizers-order.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizers-order.log"
v() {  # shapes, bench args, name, rounds
  SHAPES="$1" BENCH_ARGS="--iters 5 --step-budget-mb 0 $2" OUT=$OUT/var-$3 bash scripts/gpu-variants.sh "$4" \
    "default=$B/flce" "order=$B/flce:$V" > "$OUT/v-$3.md" 2>&1
  tail -n 4 "$OUT/v-$3.md"
}
v gemma2,llama3,qwen25 "" plain 3
v 32768,4096,128256 "" 32k 2
v llama3 "--grads de" de 2
cat "$OUT"/v-*.md > "$OUT/variants.md" && rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
env $V timeout 80 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  $B/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > "$OUT/ncu-grad-order.log" 2>&1
grep -E "Duration|SM Frequency|Elapsed Cycles|SM Active Cycles|L2 Hit Rate|DRAM Throughput|Grid Size" "$OUT/ncu-grad-order.log"
