#!/usr/bin/env bash
# s21 call 2: where does dE in a pass of its own start to pay? One pass against two (FLCE_BWD_DE_PASS=1)
# at Llama 3 with N/V 0.77 / 0.89 / 1.53 (98k / 114k / 196k tokens) and Gemma 2 at N/V 1.02 (262k tokens).
# Call 1 (gpu-de-pass.sh): two passes 0.946x at N/V 1.02 (Llama 3 128k), 1.07-1.17x at N/V <= 0.52.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call2.sh "$OUT/call.sh"
OUT=/tmp/vcross SHAPES="98304,4096,128256 114688,4096,128256 196608,4096,128256 262144,2304,256000" \
  BENCH_ARGS="--step-budget-mb 0 --iters 3" timeout 540 bash scripts/gpu-variants.sh 2 "one=gpu-bundle/flce" \
  "two=gpu-bundle/flce:FLCE_BWD_DE_PASS=1" > "$OUT/variants.md" 2>&1
echo "variants rc=$?"
tar czf "$OUT/vcross.tgz" -C /tmp vcross
grep -h "bwd Sm90" /tmp/vcross/var-one-1.log | grep -v "^| shape" | cut -d'|' -f2,8,9 | cut -c1-60,150-420
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
