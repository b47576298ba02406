#!/usr/bin/env bash
# s22 call 1: the options-epilogue candidates, decided in one call. Bundle: gpu-tests = gpu-bundle at
# wip/options-epilogue-nvrtc b938712 (scripts/gpu-prepare.sh), gpu-tests-head = wip/options-epilogue
# e9e3b0b's GPU tests; flce-main 566e87b (main), flce-fdiv b5e8da6 (softcap via __fdividef),
# flce-head e9e3b0b (fdiv + branch-free general epilogues), flce-full e5423f6 (fdiv + whole option
# tiles without a column test), flce-nvrtc b938712 (fdiv + a forward and G module per option set).
# 1. GPU cases with options and partial last tiles on both test binaries, memcheck of nvrtc's;
# 2. fused fwd+bwd with softcap and with all options, five binaries, 2 rounds, plus auto (main);
# 3. plain default at partial-tile vocabularies (50257, 151936): main / fdiv / nvrtc.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call1.sh "$OUT/call.sh"
cases=("bf16 all (257,520,300)" "bf16 softcap (257,520,300)" "bf16 bias (257,520,300)" "bf16 smoothing (257,520,300)"
  "bf16 weights (257,520,300)" "bf16 all (1024,64,8000)" "bf16 softcap (1024,64,8000)" "f16 all (257,520,300)"
  "f32 all (257,520,300)" "bf16 all (300,128,2049)" "bf16 softcap (129,200,5003)" "bf16 plain (300,128,2049)" "bf16 plain (129,200,5003)")
for t in gpu-tests gpu-tests-head; do
  timeout 70 gpu-bundle/$t --small "${cases[@]}" > "$OUT/$t.log" 2>&1
  echo "$t rc=$?"; grep -E "FAILED" "$OUT/$t.log" | cut -c1-200; tail -n 1 "$OUT/$t.log"
done
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 all (257,520,300)" \
  "bf16 softcap (129,200,5003)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
for o in softcap all; do
  OUT=$OUT/v-$o SHAPES="gemma2,llama3" BENCH_ARGS="--step-budget-mb 0 --iters 5 --loss-options $o --forward fused --backward fused" \
    timeout 150 bash scripts/gpu-variants.sh 2 "main=gpu-bundle/flce-main" "fdiv=gpu-bundle/flce-fdiv" "head=gpu-bundle/flce-head" \
    "full=gpu-bundle/flce-full" "nvrtc=gpu-bundle/flce-nvrtc" > "$OUT/variants-$o.md" 2>&1
  echo "fused, $o"; grep -v "^|---" "$OUT/variants-$o.md" | cut -d'|' -f2-6,10-11
  timeout 20 gpu-bundle/flce-main bench --shapes gemma2,llama3 --step-budget-mb 0 --iters 5 --loss-options $o > "$OUT/auto-$o.log" 2>&1
  echo "auto, $o"; grep -E "^\| (gemma2|llama3)" "$OUT/auto-$o.log" | cut -d'|' -f2-5
done
OUT=$OUT/v-plain SHAPES="8192,768,50257 8192,3584,151936" BENCH_ARGS="--step-budget-mb 0 --iters 5" timeout 80 \
  bash scripts/gpu-variants.sh 2 "main=gpu-bundle/flce-main" "fdiv=gpu-bundle/flce-fdiv" "nvrtc=gpu-bundle/flce-nvrtc" > "$OUT/variants-plain.md" 2>&1
echo "plain, partial last tile"; grep -v "^|---" "$OUT/variants-plain.md" | cut -d'|' -f2-6,10-11
(cd "$OUT" && tar czf variants-raw.tgz v-softcap v-all v-plain && rm -rf v-softcap v-all v-plain)
