#!/usr/bin/env bash
# s37 call 4 (call 3 again after its fix: the head's G read its target logits from the head plan's
# region, which the head's forward no longer writes — NaN dE in call 3, slice-finish-bug/): the vocabulary-slice plan with its halves merged in the forward's own finish (the
# rest's splits after the head's, their argmax offset in flce_forward_finish) instead of the
# phases' f64 rows and one-block kernels (call 2, slice-first/): the oracle cases that take it
# (each also runs every family and the three-product pass: the finish kernel changed for all),
# Llama 3 sampled against f64 (the slice within 1 GB), its time at 384 MB / 512 MB / 1 GB against
# the default (flce bench: fb = the default's forward + backward, step = the trading plan), then
# memcheck and racecheck on slice cases.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
timeout 130 $B/gpu-tests --small "nosoftcap" "bf16 plain (" "bf16 none (" > "$OUT/tests-slice.log" 2>&1
echo "slice cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-slice.log") ok, $(grep -c FAIL "$OUT/tests-slice.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-slice.log" | head -5 | cut -c1-300
for mb in 384 512 1024; do
  timeout 100 $B/flce bench --shapes gemma2,llama3,qwen25 --iters 5 --step-budget-mb $mb > "$OUT/bench-$mb.log" 2>&1
  echo "bench $mb MB rc=$? at ${SECONDS}s"
done
grep -h "^| [gql]" "$OUT"/bench-*.log | cut -d'|' -f2,5,6 | sort -u
timeout 130 $B/gpu-tests "bf16 llama3 sampled fused" > "$OUT/tests-sampled.log" 2>&1
echo "sampled rc=$? at ${SECONDS}s"; grep -E "\.\.\. |FAIL" "$OUT/tests-sampled.log" | grep -o "slice.*\|FAIL.*" | cut -c1-200
{ timeout 100 env FLCE_GPU_TEST_MODES=FusedTiles compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (300,128,2049)" "bf16 plain (1,64,1000)"
  echo "memcheck rc=$?"
  timeout 100 env FLCE_GPU_TEST_MODES=FusedTiles compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (300,128,2049)"
  echo "racecheck rc=$?"; } > "$OUT/sanitizers.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY|\.\.\. " "$OUT/sanitizers.log" | cut -c1-160
grep -E "Race reported" "$OUT/sanitizers.log" | sed 's/.*at \([a-z_0-9]*\).*/\1/' | sort | uniq -c

# the binding: test_fast.py (the three-product and vocabulary-slice passes through torch)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
T=$PWD/$B/python-tests
(cd /tmp && PYTHONPATH=/tmp/site timeout 110 python3 -m pytest -q -p no:cacheprovider $T/test_fast.py \
  > $OUT/pytest-fast.log 2>&1; echo "exit $?" >> $OUT/pytest-fast.log)
echo "pytest at ${SECONDS}s"; grep -E "passed|failed|^FAILED|^ERROR|exit" $OUT/pytest-fast.log | tail -n 6
echo "total ${SECONDS}s"
