#!/usr/bin/env bash
# s31 call 6: the staged folds' `freed` arrived by every helper thread (c0aa62f) — gpu-bundle =
# c0aa62f; flce-prev = 683d7d1 (call 3's bundle). racecheck / memcheck / synccheck on many-tile
# cases (the rest on 18 SMs; pairs on 2 SMs; the staged G, gfold=1, on 18 SMs), GPU cases, and
# prev / new timed at Llama 3 and the 16k loss, 2 rounds.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
R="bf16 plain (1000,64,2200) rest 18 SMs cluster 2"
P="bf16 plain (1024,64,8000) pairs 2 SMs"
for tool in racecheck memcheck synccheck; do
  timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "$R" "$P" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" /tmp/$tool.log | tail -n 1
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
FLCE_SM90_MAINLOOP=gfold=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "$R" > /tmp/rc-g.log 2>&1
echo "racecheck gfold rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY" /tmp/rc-g.log | tail -n 1
{ echo "== FLCE_SM90_MAINLOOP=gfold=1 compute-sanitizer --tool racecheck"; cat /tmp/rc-g.log; } >> "$OUT/sanitizers.log"
timeout 60 $B/gpu-tests --small " rest " "2 SMs" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
runs=$(mktemp -d)
V=("prev=$B/flce-prev" "new=$B/flce")
SHAPES=llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 50 bash scripts/gpu-variants.sh 2 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 40 bash scripts/gpu-variants.sh 2 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
cat "$OUT/variants.md"
