#!/usr/bin/env bash
# s32 call 4: the three-product pass's token chunks made equal — the 16k training step's loss at
# 2 GB runs chunks of 6144 / 6144 / 4096 tokens; FLCE_STEP_MAX_TOKENS=5504 gives 5504 / 5504 / 5376
# (the same three chunks, 43 / 43 / 42 token tiles) — timed in `flce bench` (5 rounds) and in the
# 16k training step beside Liger, each way in its own process.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
runs=$(mktemp -d)
V=("default=$B/flce" "even=$B/flce:FLCE_STEP_MAX_TOKENS=5504")
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 150 bash scripts/gpu-variants.sh 5 "${V[@]}" > "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
grep -H "" $runs/train/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
for mt in default 5504; do
  if [ $mt = default ]; then unset FLCE_STEP_MAX_TOKENS; else export FLCE_STEP_MAX_TOKENS=$mt; fi
  echo "== FLCE_STEP_MAX_TOKENS=$mt" >> "$OUT/train.log"
  timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 3 --versus liger \
    --repeats 5 --out /tmp/train-$mt.json >> "$OUT/train.log" 2>&1
  echo "train $mt rc=$? at ${SECONDS}s"
done
grep -E "^==|^\| 16384" "$OUT/train.log"
grep -v "^$" "$OUT/variants.md" | tail -4
