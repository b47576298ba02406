#!/usr/bin/env bash
# s39 call 1: token chunks (scripts/gpu-token-chunks.sh, split to fit 600 s): the token-chunks
# cases, the auto cases, the 32k/65k/128k timing, then small cases until the deadline.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
timeout 90 $B/gpu-tests --small "token-chunks" > "$OUT/tests-tc.log" 2>&1
echo "token-chunks cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-tc.log") ok, $(grep -c FAIL "$OUT/tests-tc.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-tc.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-tc.log"
timeout 60 env FLCE_BWD_TOKEN_CHUNKS=auto $B/gpu-tests --small "long-tail" "de-head" "de-pass" > "$OUT/tests-auto.log" 2>&1
echo "auto cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-auto.log") ok, $(grep -c FAIL "$OUT/tests-auto.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-auto.log" | head -3 | cut -c1-300
SHAPES="32768,4096,128256 65536,4096,128256 131072,4096,128256" \
  BENCH_ARGS="--iters 3 --step-budget-mb 0" OUT=$OUT/var timeout 230 bash scripts/gpu-variants.sh 2 \
  "today=$B/flce:FLCE_BWD_TOKEN_CHUNKS=0" "always=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1" \
  "one-pass=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1,FLCE_BWD_DE_PASS=0" \
  > "$OUT/variants.md" 2>&1
echo "variants rc=$? at ${SECONDS}s"; tail -n 12 "$OUT/variants.md"
tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
left=$((560 - SECONDS)); [ $left -gt 20 ] || left=20
timeout $left $B/gpu-tests --small > "$OUT/tests-small.log" 2>&1
echo "small cases rc=$? (limit ${left}s) at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-small.log") ok, $(grep -c FAIL "$OUT/tests-small.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-small.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-small.log"
echo "total ${SECONDS}s"
