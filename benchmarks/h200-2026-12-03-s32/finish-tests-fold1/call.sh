#!/usr/bin/env bash
# s32 call 2: the rest of the finish change's GPU cases (bad targets / weights, the rest, f32 with two
# finish blocks) and racecheck; the compact forward staged (FLCE_SM90_MAINLOOP=fold=1: only the
# three-product pass's compact kernel differs from the default fold=2) against the default at the
# model shapes and the 16k loss, 3 rounds; ncu stall profile of one G launch (flce_sm90_grad) at Llama 3.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 100 $B/gpu-tests --small bad-target bad-weights "rest 18" "f32 weights (257,520,300)" "f32 all (257,520,300)" \
  "f32 none (257,520,300)" "f16 weights (257,520,300)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" > /tmp/race.log 2>&1
echo "racecheck rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|\.\.\. " /tmp/race.log | cut -c1-100 | tail -n 3
{ echo "== compute-sanitizer --tool racecheck"; cat /tmp/race.log; } > "$OUT/sanitizers.log"
runs=$(mktemp -d)
V=("new=$B/flce" "fold1=$B/flce:FLCE_SM90_MAINLOOP=fold=1")
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 150 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 60 bash scripts/gpu-variants.sh 3 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
OUT=$OUT SHAPE=llama3 KERNEL=grad SOURCE=1 CUBLAS=0 T_NCU=100 bash scripts/ncu-sm90.sh 2>&1 | tail -n 20
echo "ncu at ${SECONDS}s"
cat "$OUT/variants.md" | grep -v "^$" | tail -12
