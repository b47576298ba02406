#!/usr/bin/env bash
# s35 call 2: the default backward's G kernel — within an L2 budget (FLCE_SM90_G_L2_MB, new knob)
# and staged (FLCE_SM90_MAINLOOP=gfold=1), alone and together: GPU tests under each, then
# interleaved timing at the model shapes (default budget: the four-product call).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
cases=("(255,507,123)" "(1024,64,8000)" "(129,200,5003)" chunked)
FLCE_SM90_G_L2_MB=32 timeout 60 $B/gpu-tests --small "${cases[@]}" > "$OUT/tests-gl2.log" 2>&1
echo "tests gl2 rc=$? at ${SECONDS}s"; tail -1 "$OUT/tests-gl2.log"
FLCE_SM90_G_L2_MB=32 FLCE_SM90_MAINLOOP=gfold=1 timeout 60 $B/gpu-tests --small "${cases[@]}" > "$OUT/tests-gst-gl2.log" 2>&1
echo "tests gst+gl2 rc=$? at ${SECONDS}s"; tail -1 "$OUT/tests-gst-gl2.log"
FLCE_SM90_G_L2_MB=32 FLCE_SM90_MAINLOOP=gfold=1 timeout 60 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "(255,507,123)" chunked > "$OUT/memcheck-gst-gl2.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|passed" "$OUT/memcheck-gst-gl2.log" | tail -2
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$OUT/var bash scripts/gpu-variants.sh 2 \
  "base=$B/flce" "gl2=$B/flce:FLCE_SM90_G_L2_MB=32" "gst=$B/flce:FLCE_SM90_MAINLOOP=gfold=1" \
  "gst_gl2=$B/flce:FLCE_SM90_MAINLOOP=gfold=1,FLCE_SM90_G_L2_MB=32" "gst_gl2_16=$B/flce:FLCE_SM90_MAINLOOP=gfold=1,FLCE_SM90_G_L2_MB=16" > "$OUT/variants.md" 2>&1
cp $OUT/var/*.md "$OUT/" 2>/dev/null; tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
cat "$OUT/variants.md" | tail -20
