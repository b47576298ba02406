#!/usr/bin/env bash
# s21 call 4: the sm90 forward split into a plain kernel (0 spills) and one for logit options
# (flce_sm90_forward_options). GPU cases with every option on TMA-family shapes and partial last
# tiles, memcheck, then old (c404841) against new: plain default at the model shapes, and
# --loss-options softcap / all with the fused forward and backward; the auto (cuBLAS-chunk) path
# with options for reference.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call4.sh "$OUT/call.sh"
timeout 100 gpu-bundle/gpu-tests --small "(257,520,300)" "bf16 plain (1024,64,8000)" "bf16 all (1024,64,8000)" \
  "(300,128,2049)" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED" "$OUT/tests.log" | cut -c1-200; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 all (257,520,300)" \
  "bf16 plain (300,128,2049)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
OUT=/tmp/vplain BENCH_ARGS="--step-budget-mb 0" timeout 70 bash scripts/gpu-variants.sh 2 "old=gpu-bundle/flce-old" \
  "new=gpu-bundle/flce" > "$OUT/variants-plain.md" 2>&1
OUT=/tmp/vsoft BENCH_ARGS="--step-budget-mb 0 --loss-options softcap --forward fused --backward fused" timeout 70 \
  bash scripts/gpu-variants.sh 2 "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > "$OUT/variants-softcap.md" 2>&1
for o in softcap all; do
  timeout 25 gpu-bundle/flce bench --shapes gemma2,llama3,qwen25 --step-budget-mb 0 --loss-options $o > "$OUT/auto-$o.log" 2>&1
  timeout 25 gpu-bundle/flce bench --shapes gemma2,llama3,qwen25 --step-budget-mb 0 --loss-options $o --forward fused --backward fused > "$OUT/fused-$o.log" 2>&1
done
tar czf "$OUT/v.tgz" -C /tmp vplain vsoft
for f in variants-plain variants-softcap; do echo "$f"; grep -v "^|---" "$OUT/$f.md" | cut -d'|' -f2-6,10-11; done
for f in auto-softcap fused-softcap auto-all fused-all; do echo "$f"; grep -E "^\| (gemma2|llama3|qwen25)" "$OUT/$f.log" | cut -d'|' -f2-5; done
