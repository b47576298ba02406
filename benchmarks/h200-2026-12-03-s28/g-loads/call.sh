#!/usr/bin/env bash
# s28 call 2: the three-product G kernel with every pass's q loaded before G is written, and the
# accumulators' rounding four elements a step (gpu-bundle = the commit after 78d62df;
# flce-main = 78d62df, kernels as main c6b487c). Small GPU cases (all), memcheck; then main /
# new, 5 interleaved rounds at Gemma 2 and Llama 3 (4 GB three-product) and at the training
# step's loss shape (16384, 2048, 128256) with 2 GB (3 chunks, dC's f32 accumulator rounded);
# then the 16k training step, Liger against flce@2G (liger-kernel 0.8.5), if time is left.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 170 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (257,520,300)" \
  "f16 softcap (129,200,5003)" "bf16 all (1024,64,8000)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 150 bash scripts/gpu-variants.sh 5 \
  "main=$B/flce-main" "new=$B/flce" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 100 bash scripts/gpu-variants.sh 5 \
  "main=$B/flce-main" "new=$B/flce" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
if [ $SECONDS -lt 330 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/flce-*.whl \
    .whl/small/liger_kernel-*.whl
  PYTHONPATH=/tmp/site timeout $((560 - SECONDS)) python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G \
    --rounds 2 --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
  echo "train rc=$? at ${SECONDS}s"; tail -n 5 "$OUT/train.log"
fi
cat "$OUT/variants.md"
