#!/usr/bin/env bash
# s21 call 3: two passes by default where the one pass's tail would recompute >= 3/4 of the vocabulary
# (plan::de_pass_pays). GPU cases whose default plan changes (N >= 0.75 V) and the forced ones,
# memcheck of two of them, then the default against FLCE_BWD_DE_PASS=0 at Llama 3 128k (two passes
# now) and Gemma 2 128k (one pass still: the two should tie).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call3.sh "$OUT/call.sh"
timeout 200 gpu-bundle/gpu-tests --small "(255,507,123)" "(257,520,300)" "(5000,64,3000)" "(3000,64,4000)" "de-pass" \
  "de-head" "long-tail" > "$OUT/tests-default.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED" "$OUT/tests-default.log" | cut -c1-200; tail -n 1 "$OUT/tests-default.log"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "de-pass default" \
  "bf16 plain (255,507,123)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
OUT=/tmp/vrule SHAPES="131072,4096,128256 131072,2304,256000" BENCH_ARGS="--step-budget-mb 0 --iters 3" \
  timeout 200 bash scripts/gpu-variants.sh 2 "rule=gpu-bundle/flce" "one=gpu-bundle/flce:FLCE_BWD_DE_PASS=0" > "$OUT/variants.md" 2>&1
tar czf "$OUT/vrule.tgz" -C /tmp vrule
grep -h "bwd Sm90" /tmp/vrule/var-rule-1.log | grep -v "^| shape" | cut -d'|' -f2,8,9 | cut -c1-60,150-460
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
