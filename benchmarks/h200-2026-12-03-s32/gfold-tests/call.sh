#!/usr/bin/env bash
# s32 call 5: the opt-in staged G (FLCE_SM90_MAINLOOP=gfold=1) after c2a3ad5 reordered its store
# coordinates' arithmetic (never run on a GPU since): its GPU cases and memcheck / synccheck.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d) FLCE_SM90_MAINLOOP=gfold=1
B=gpu-bundle
timeout 140 $B/gpu-tests --small "bf16 plain" "f16 plain" "bf16 none" "bf16 ignore7" "2 SMs" "rest 18" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 plain (1000,64,2200) rest 18 SMs cluster 2" \
    "f16 plain (300,128,2049)" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|\.\.\. " /tmp/$tool.log | cut -c1-90 | tail -n 3
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
