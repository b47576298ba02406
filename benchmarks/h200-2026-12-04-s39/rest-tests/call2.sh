#!/usr/bin/env bash
# s39 call 2: the small cases call 1's deadline cut (72 of 195), memcheck on two token-chunks
# cases, v46's host gap (profile_kernels --host at Gemma 2).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 290 $B/gpu-tests --small "f32 plain (1024" "f32 none (1024" "f32 softcap (1024" "f32 all (1024" \
  "f32 nosoftcap (1024" "f32 shift" "de-chunks" "chunked-budget" "SMs" "pairs" "band" "rest" "de-head" \
  "long-tail" "de-pass" "frozen" "bad-target" "sm90-mn-major" "phases" > "$OUT/tests-rest.log" 2>&1
echo "rest of small cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-rest.log") ok, $(grep -c FAIL "$OUT/tests-rest.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-rest.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-rest.log"
timeout 80 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 all (3000,64,12000) token-chunks" \
  "bf16 all (5000,64,3000) de-pass token-chunks" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|passed" "$OUT/memcheck.log"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 150 python3 scripts/profile_kernels.py --shape gemma2 --steps 3 --host --top 14 --gaps 4 \
  --configs "auto/auto/min,auto/auto/1073741824" > "$OUT/profile-loop.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"; grep -E "^## |GPU idle|^- " "$OUT/profile-loop.log" | head -16
echo "total ${SECONDS}s"
