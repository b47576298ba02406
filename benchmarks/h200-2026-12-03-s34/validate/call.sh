#!/usr/bin/env bash
# s34 call 2: the final commit's validation on the GPU — the binding's whole pytest suite on CUDA
# (last run whole on 2026-12-01), the GPU test cases (--small, as many as 150 s hold), memcheck on
# a three-product case; then ncu of the plain and the compact forward at Llama 3 beside cuBLAS's
# logits GEMM (the compact one ran 12.90 against 11.44 ms in s32's profile: where the 13% goes).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl > /dev/null 2>&1
(cd /tmp && PYTHONPATH=/tmp/site timeout 240 python3 -m pytest -q -p no:cacheprovider $OLDPWD/$B/python-tests > $OUT/pytest.log 2>&1; echo "exit $?" >> $OUT/pytest.log)
echo "pytest at ${SECONDS}s: $(tail -n 2 $OUT/pytest.log | head -n 1)"; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -5
timeout 150 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" > /tmp/mc.log 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|\.\.\. " /tmp/mc.log | cut -c1-120 | tail -n 2
{ echo "== compute-sanitizer --tool memcheck"; cat /tmp/mc.log; } > "$OUT/sanitizers.log"
T_NCU=90 OUT=$OUT SHAPE=llama3 KERNEL=forward CUBLAS=1 bash scripts/ncu-sm90.sh > /dev/null 2>&1
T_NCU=90 OUT=$OUT SHAPE=llama3 KERNEL=forward_compact STEP_MB=4096 CUBLAS=0 bash scripts/ncu-sm90.sh > /dev/null 2>&1
echo "ncu at ${SECONDS}s"
for f in $OUT/ncu-*.log; do echo "== $f"; grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|DRAM Throughput|L2 Hit Rate|Issue Slots Busy|Local" "$f" | head -9; done
