#!/usr/bin/env bash
# s44 call 7: the products' α — its GPU test on this build and on aa1bfab's kernels (must fail
# there), the cases call 5's time limit left out, and an interleaved A/B of aa1bfab against this build
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 60 ./gpu-bundle/gpu-tests mean-scale > "$OUT/tests-mean-scale.log" 2>&1
echo "mean-scale (this build) rc=$? ${SECONDS}s: $(grep '^test mean-scale' $OUT/tests-mean-scale.log | cut -c1-400)"
timeout 60 ./gpu-bundle/old/gpu-tests mean-scale > "$OUT/tests-mean-scale-aa1bfab.log" 2>&1
echo "mean-scale (aa1bfab's kernels) rc=$? ${SECONDS}s: $(grep '^test mean-scale' $OUT/tests-mean-scale-aa1bfab.log | cut -c1-400)"
timeout 170 ./gpu-bundle/gpu-tests "token-chunks" "frozen" "phases" "bad-target" "bad-weights" "bf16 llama3 sampled fused" \
  > "$OUT/tests-rest.log" 2>&1
echo "rest rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok' $OUT/tests-rest.log) failed=$(grep -c '^test .* FAILED' $OUT/tests-rest.log) of $(grep -c '^test ' $OUT/tests-rest.log)"
grep -h "^test " "$OUT/tests-rest.log" | grep -v " ok" | head
mkdir -p /tmp/ab
OUT=/tmp/ab BENCH_ARGS="--step-budget-mb 8192" timeout 200 bash scripts/gpu-variants.sh 3 \
  "aa1bfab=gpu-bundle/old/flce" "alpha=gpu-bundle/flce" > "$OUT/ab.txt" 2>&1
echo "ab rc=$? ${SECONDS}s"
tar czf "$OUT/ab-logs.tgz" -C /tmp ab
tail -n 25 "$OUT/ab.txt"
