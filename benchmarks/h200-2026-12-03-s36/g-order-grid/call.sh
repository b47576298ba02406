#!/usr/bin/env bash
# s36 call 2: the raster-ordered G default (gorder=1) whose module runs the (slots, splits) grid at
# run time for the token-outer plan (group_rows 0): the frozen-classifier cases (that path) and
# the small cases, sanitizers on both paths, then timing against gorder=0 — dE only (the
# token-outer plan: should now be even), the model shapes and Llama 3 at 32k tokens.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
OLD=FLCE_SM90_MAINLOOP=gorder=0
timeout 90 $B/gpu-tests --small frozen-classifier > "$OUT/tests-frozen.log" 2>&1
echo "frozen rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-frozen.log") ok, $(grep -c FAIL "$OUT/tests-frozen.log") FAIL"
{ timeout 90 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 none (1100,136,9001)"
  echo "memcheck frozen rc=$?"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 none (1100,136,9001)"
  echo "racecheck frozen rc=$?"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)"
  echo "racecheck rc=$?"; } > "$OUT/sanitizers.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizers.log"
v() {  # shapes, bench args, name, rounds
  SHAPES="$1" BENCH_ARGS="--iters 5 --step-budget-mb 0 $2" OUT=$OUT/var-$3 bash scripts/gpu-variants.sh "$4" \
    "order=$B/flce" "grid=$B/flce:$OLD" > "$OUT/v-$3.md" 2>&1
  tail -n 4 "$OUT/v-$3.md"
}
v llama3 "--grads de" de 3
v gemma2,llama3,qwen25 "" plain 2
v 32768,4096,128256 "" 32k 2
cat "$OUT"/v-*.md > "$OUT/variants.md" && rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
timeout 120 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok, $(grep -c FAIL "$OUT/tests.log") FAIL"
echo "total ${SECONDS}s"
