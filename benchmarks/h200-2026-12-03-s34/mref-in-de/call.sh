#!/usr/bin/env bash
# s34 call 4: the compact forward's per-tile maxima in the chunk's dE rows (plan::MrefPlace) —
# GPU cases with three-product runs (D even: maxima in dE; D odd, (255,507,123): in the
# workspace), the misaligned-dE refusal, memcheck; flce_fast's time and extra memory at the model
# shapes (time_call.py; torch.compile's from suite/: 4001.0 / 2004.0 / 2376.0 MB); the binding's
# three-product tests.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl > /dev/null 2>&1
timeout 100 $B/gpu-tests --small "(257,520,300)" "(255,507,123)" "(1,64,1000)" "(1024,64,8000)" bad-weights > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" > /tmp/mc.log 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|\.\.\. " /tmp/mc.log | cut -c1-120 | tail -n 2
{ echo "== compute-sanitizer --tool memcheck"; cat /tmp/mc.log; } > "$OUT/sanitizers.log"
(cd benchmarks && PYTHONPATH=/tmp/site timeout 60 python3 time_call.py --method flce_fast --shapes gemma2,llama3,qwen25 > $OUT/time_call.jsonl 2>&1; echo "time_call rc=$? at ${SECONDS}s"; cat $OUT/time_call.jsonl | grep shape)
(cd $B/python-tests && PYTHONPATH=/tmp/site timeout 70 python3 -m pytest -q -p no:cacheprovider test_fast.py > "$OUT/pytest-fast.log" 2>&1; echo "pytest rc=$? at ${SECONDS}s"; tail -n 1 "$OUT/pytest-fast.log")
