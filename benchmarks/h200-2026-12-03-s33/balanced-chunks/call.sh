#!/usr/bin/env bash
# s33 call 6: the step planner's balanced chunks (plan/step.rs balanced_chunks): the 16k training
# step with workspace_budget="peak" beside 2 GB and Liger, the three-product pass at the budget
# "peak" got in call 5 (2,112 MB) before (flce-prev) and after, and the three-product GPU cases.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 60 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@peak,flce@2G --rounds 1 \
  --versus liger --repeats 5 > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -E "^\| 16384" "$OUT/train.log"
runs=$(mktemp -d)
V=("prev=$B/base/flce-prev" "new=$B/flce")
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2112" OUT=$runs/train timeout 40 bash scripts/gpu-variants.sh 2 "${V[@]}" > "$OUT/variants.md" 2>&1
grep -H "" $runs/train/var-*.jsonl 2>/dev/null | sed "s|^$runs/||" > "$OUT/variants.jsonl"
grep -E "^\| 16384" "$OUT/variants.md"
timeout 30 $B/gpu-tests --small "(255,507,123)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-200 | head -4
