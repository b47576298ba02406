#!/usr/bin/env bash
# s33 call 5: the new defaults — both forwards staged with the fold a row a thread (fold=1) and
# workspace_budget="peak" with a 64 MB margin — GPU cases, racecheck on a many-tile case (its
# three-product runs: the staged compact forward), the peak-budget pytest cases, the training
# step (liger, flce@peak, flce@2G, flce at 16k and 8k) and timing against main.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 80 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "plain (1000,64,2200) rest 18 SMs cluster 1" > /tmp/race.log 2>&1
echo "racecheck rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY|\.\.\. " /tmp/race.log | cut -c1-100 | tail -n 3
{ echo "== racecheck"; cat /tmp/race.log; } > "$OUT/sanitizers.log"
(cd $B/python-tests && timeout 60 python3 -m pytest -q -x test_fast.py -k "peak" > "$OUT/pytest-peak.log" 2>&1; echo "pytest rc=$?"; tail -n 2 "$OUT/pytest-peak.log")
for tok in 16384 8192; do
  timeout 100 python3 benchmarks/train_step.py --tokens $tok --methods liger,flce@peak,flce@2G,flce --rounds 2 \
    --versus liger --repeats 5 --out /tmp/train-$tok.json >> "$OUT/train.log" 2>&1
  echo "train $tok rc=$? at ${SECONDS}s"
done
runs=$(mktemp -d)
V=("main=$B/base/flce-main" "new=$B/flce")
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 60 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
[ $SECONDS -lt 330 ] && SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout $((400 - SECONDS)) bash scripts/gpu-variants.sh 2 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in train model; do grep -H "" $runs/$o/var-*.jsonl 2>/dev/null | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
grep -E "^\| (8192|16384) " "$OUT/train.log"
grep -v "^$" "$OUT/variants.md" | grep -E "^\| (16384|gemma2|llama3|qwen25)"
