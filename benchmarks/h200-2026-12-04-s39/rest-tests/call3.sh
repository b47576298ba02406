#!/usr/bin/env bash
# s39 call 3: the small cases calls 1-2 did not reach (quick ones first), then one-step profiles
# of Llama 3 at 65k tokens, today's backward and token chunks.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 110 $B/gpu-tests --small "frozen" "unpaired" "bad-target" "sm90-mn-major" "phases" > "$OUT/tests-rest2.log" 2>&1
echo "quick rest rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-rest2.log") ok, $(grep -c FAIL "$OUT/tests-rest2.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-rest2.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-rest2.log"
timeout 190 $B/gpu-tests --small "de-pass" "(5000,64,3000) long-tail" > "$OUT/tests-rest3.log" 2>&1
echo "de-pass/long-tail rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-rest3.log") ok, $(grep -c FAIL "$OUT/tests-rest3.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-rest3.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-rest3.log"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
for k in 0 1; do
  PYTHONPATH=/tmp/site FLCE_BWD_TOKEN_CHUNKS=$k timeout 60 python3 scripts/profile_kernels.py --shape llama3_n65536 \
    --steps 1 --top 14 --configs "auto/auto/min" > "$OUT/profile-65k-tc$k.log" 2>&1
  echo "profile tc=$k rc=$? at ${SECONDS}s"; grep -E "^## |^\| flce|^\| nvjet" "$OUT/profile-65k-tc$k.log" | head -12 | cut -c1-120
done
echo "total ${SECONDS}s"
