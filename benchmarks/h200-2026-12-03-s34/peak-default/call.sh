#!/usr/bin/env bash
# s34 call 1: (a) the forward finish without W or losses in lse-only launches (the three-product
# pass's chunks) — GPU cases with class weights + smoothing, bad input, three-product runs;
# memcheck / initcheck; (b) flce.patch with workspace_budget="peak" by default — the binding's
# test_hf.py and test_fast.py on the GPU (the "peak" cases under torch.compile and CUDA-graph
# capture among them); (c) the training step: liger, flce (now "peak"), flce@min (the old default).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
mkdir -p /tmp/small && cp .whl/small/*.whl /tmp/small/
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 100 $B/gpu-tests --small "(255,507,123)" "(257,520,300)" "(1,64,1000)" "(1024,64,8000)" bad-target bad-weights \
  chunked-budget > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck initcheck; do
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" \
    "f32 chunked-budget (700,96,3000)" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|\.\.\. " /tmp/$tool.log | cut -c1-120 | tail -n 3
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
(cd $B/python-tests && timeout 150 python3 -m pytest -q -p no:cacheprovider test_hf.py test_fast.py > "$OUT/pytest.log" 2>&1; echo "pytest rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -n 6)
for tok in 16384 8192; do
  timeout 110 python3 benchmarks/train_step.py --tokens $tok --methods liger,flce,flce@min --rounds 2 \
    --versus liger --repeats 5 --out /tmp/train-$tok.json >> "$OUT/train.log" 2>&1
  echo "train $tok rc=$? at ${SECONDS}s"
done
grep -E "^\| (8192|16384) " "$OUT/train.log"
