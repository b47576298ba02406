#!/usr/bin/env bash
# s44 call 5: the products' α (the mean's g out of G) — GPU cases on every backward path, own products, memcheck
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
T=./gpu-bundle/gpu-tests
timeout 300 $T "(257,520,300)" "(1,64,1000)" "de-chunks" "rest 18" "rest 34" "de-pass" "de-head" "token-chunks" \
  "long-tail" "frozen" "chunked-budget" "phases" "bad-target" "shift" "bf16 llama3 sampled fused" > "$OUT/tests.log" 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok' $OUT/tests.log) failed=$(grep -c '^test .* FAILED' $OUT/tests.log) of $(grep -c '^test ' $OUT/tests.log)"; tail -n 1 "$OUT/tests.log"
FLCE_SM90_PRODUCTS=1 timeout 90 $T "bf16 all (1024,64,8000)" "bf16 plain (3000,64,12000) de-head" "bf16 sum (600,520,5000) de-chunks" \
  "f16 none (300,128,2049)" > "$OUT/tests-own-products.log" 2>&1
echo "own products rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok' $OUT/tests-own-products.log) of $(grep -c '^test ' $OUT/tests-own-products.log)"; tail -n 1 "$OUT/tests-own-products.log"
FLCE_GPU_TEST_MODES=FusedTiles timeout 60 compute-sanitizer --tool memcheck $T --small "bf16 all (257,520,300)" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY|^gpu:' $OUT/memcheck.log | tr '\n' ' ')"
FLCE_SM90_PRODUCTS=1 FLCE_GPU_TEST_MODES=FusedTiles timeout 60 compute-sanitizer --tool memcheck $T "bf16 sum (600,520,5000) de-chunks" \
  > "$OUT/memcheck-own.log" 2>&1
echo "memcheck own products rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY|^gpu:' $OUT/memcheck-own.log | tr '\n' ' ')"
grep -h "^test " "$OUT/tests.log" | grep -v " ok" | head -20
