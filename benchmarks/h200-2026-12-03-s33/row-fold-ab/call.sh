#!/usr/bin/env bash
# s33 call 4: (a) what workspace_budget="peak" resolves to in the training step (scripts/.peakprobe.py
# is this call's peakprobe.py); (b) the compact forward staged (fold=1) against in registers (the
# default fold=2), both with the thread-per-row fold, 5 rounds; (c) warp-stall samples by SASS line of
# the staged compact forward at the 16k loss's first chunk; (d) the 16k step with fold=1.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"; cp scripts/.peakprobe.py "$OUT/peakprobe.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 120 python3 scripts/.peakprobe.py > "$OUT/peakprobe.log" 2>&1
echo "peakprobe rc=$? at ${SECONDS}s"; grep -v "^  step" "$OUT/peakprobe.log" | cut -c1-400 | tail -8
runs=$(mktemp -d)
V=("new=$B/flce" "new_fold1=$B/flce:FLCE_SM90_MAINLOOP=fold=1")
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 100 bash scripts/gpu-variants.sh 5 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 150 bash scripts/gpu-variants.sh 4 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in train model; do grep -H "" $runs/$o/var-*.jsonl 2>/dev/null | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
FLCE_SM90_MAINLOOP=fold=1 timeout 100 ncu --clock-control none -k "regex:^flce_sm90_forward_compact$" -c 1 --section WarpStateStats \
  --section SpeedOfLight --section SourceCounters --page source --csv --print-source sass \
  $B/flce bench --shapes 16384,2048,128256 --forward auto --backward auto --step-budget-mb 2048 > /tmp/cs.csv 2>&1
echo "ncu rc=$? at ${SECONDS}s"; gzip -c /tmp/cs.csv > "$OUT/compact-staged-source.csv.gz"
FLCE_SM90_MAINLOOP=fold=1 timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 > "$OUT/train-fold1.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -E "^\| 16384" "$OUT/train-fold1.log"
grep -v "^$" "$OUT/variants.md" | grep -E "^\| (16384|gemma2|llama3|qwen25)"
