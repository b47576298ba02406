#!/usr/bin/env bash
# s21 call 4 (trimmed to the session's last ~3 device minutes): the sm90 forward split into a plain
# kernel (0 spills) and one for logit options (flce_sm90_forward_options). GPU cases with every
# option on a TMA-family shape and partial last tiles, memcheck of one, then old (c404841) against
# new, plain default and --loss-options softcap with the fused forward and backward (1 round each),
# and the auto (cuBLAS-chunk forward) path with softcap for reference.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call4.sh "$OUT/call.sh"
timeout 50 gpu-bundle/gpu-tests --small "bf16 all (257,520,300)" "bf16 softcap (257,520,300)" "bf16 bias (257,520,300)" \
  "bf16 weights (257,520,300)" "bf16 all (1024,64,8000)" "bf16 plain (300,128,2049)" "bf16 plain (129,200,5003)" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED" "$OUT/tests.log" | cut -c1-200; tail -n 1 "$OUT/tests.log"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 all (257,520,300)" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
OUT=$OUT/vplain SHAPES="gemma2,llama3" BENCH_ARGS="--step-budget-mb 0 --iters 5" timeout 40 bash scripts/gpu-variants.sh 1 \
  "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > "$OUT/variants-plain.md" 2>&1
grep -v "^|---" "$OUT/variants-plain.md" | cut -d'|' -f2-6,10-11
OUT=$OUT/vsoft SHAPES="gemma2,llama3" BENCH_ARGS="--step-budget-mb 0 --iters 5 --loss-options softcap --forward fused --backward fused" \
  timeout 40 bash scripts/gpu-variants.sh 1 "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > "$OUT/variants-softcap.md" 2>&1
grep -v "^|---" "$OUT/variants-softcap.md" | cut -d'|' -f2-6,10-11
timeout 15 gpu-bundle/flce bench --shapes gemma2,llama3 --step-budget-mb 0 --iters 5 --loss-options softcap > "$OUT/auto-softcap.log" 2>&1
echo auto-softcap; grep -E "^\| (gemma2|llama3)" "$OUT/auto-softcap.log" | cut -d'|' -f2-5
