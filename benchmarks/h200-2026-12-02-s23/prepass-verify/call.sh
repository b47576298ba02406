#!/usr/bin/env bash
# s23 call 2, bundle at wip/options-prepass with G of whole option tiles through the staging
# slices (the "staged" binary of call 1; scripts/gpu-prepare.sh): the GPU cases with options in
# every dtype, the phases / de-pass / shift cases, memcheck of the option modules, pytest's
# option cases. Deciding whether the branch merges.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call2.sh "$OUT/call.sh"
B=gpu-bundle
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 bias (257,520,300)" \
  "bf16 smoothing (257,520,300)" "f16 all (257,520,300)" "phases bf16 all (300,128,2049)" "bf16 all (3000,64,4000) de-pass" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
timeout 200 $B/gpu-tests --small "all" "softcap" "bias" "smoothing" "weights" "chunked-budget" > "$OUT/tests.log" 2>&1
echo "option tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep FAILED "$OUT/tests.log" | cut -c1-200; tail -n 1 "$OUT/tests.log"
timeout 80 $B/gpu-tests --small "phases" "de-pass" "shift" > "$OUT/tests-phases.log" 2>&1
echo "phases tests rc=$?"; grep FAILED "$OUT/tests-phases.log" | cut -c1-200; tail -n 1 "$OUT/tests-phases.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
(cd /tmp && timeout 100 python3 -m pytest -q -p no:cacheprovider -x "$OLDPWD/$B/python-tests" -k "softcap or bias or smoothing or option") \
  > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -n 2 "$OUT/pytest.log"
