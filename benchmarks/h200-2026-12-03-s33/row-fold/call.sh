#!/usr/bin/env bash
# s33 call 3: the staged fold a thread per row (forward_staged.cuh): GPU cases under the default
# (the plain forward staged, fold=2) and under FLCE_SM90_MAINLOOP=fold=1 (the compact forward
# staged too: every three-product run), racecheck on a many-tile case, memcheck; then timing
# against main (gpu-bundle/base/flce-main) at the 16k loss and the model shapes.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 110 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6
FLCE_SM90_MAINLOOP=fold=1 timeout 70 $B/gpu-tests --small " rest " "bf16 weights (257,520,300)" "f16 all (257,520,300)" \
  "(1,64,1000)" "bf16 none (255,507,123)" "(1024,64,8000)" > "$OUT/tests-fold1.log" 2>&1
echo "tests fold1 rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-fold1.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests-fold1.log" | cut -c1-300 | head -6
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "plain (1000,64,2200) rest 18 SMs cluster 2" > /tmp/race.log 2>&1
echo "racecheck rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY|\.\.\. " /tmp/race.log | cut -c1-100 | tail -n 3
FLCE_SM90_MAINLOOP=fold=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" > /tmp/mem.log 2>&1
echo "memcheck fold1 rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY" /tmp/mem.log | tail -n 1
{ echo "== racecheck (default)"; cat /tmp/race.log; echo "== memcheck (fold=1)"; cat /tmp/mem.log; } > "$OUT/sanitizers.log"
runs=$(mktemp -d)
V=("main=$B/base/flce-main" "new=$B/flce" "new_fold1=$B/flce:FLCE_SM90_MAINLOOP=fold=1")
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 100 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
echo "variants 16k at ${SECONDS}s"
[ $SECONDS -lt 420 ] && SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout $((560 - SECONDS)) bash scripts/gpu-variants.sh 2 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in train model; do grep -H "" $runs/$o/var-*.jsonl 2>/dev/null | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
grep -v "^$" "$OUT/variants.md" | grep -E "^\||ratio" | tail -14
