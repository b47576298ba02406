#!/usr/bin/env bash
# The cuBLAS family's G kernel (kernels/cublas/grad_from_logits.cu) compiled per set of logit
# options, as the three-product G since s28 (docs/parked/cublas-grad-modules.patch, s29: its
# default module 48 → 32 registers and 10.5 → 2.5 KB of shared memory by ptxas, sm_90a; 37
# registers on sm_86, so 5 → 8 blocks an SM on sm_80 / sm_90 and 5 → 6 on sm_86; plain calls'
# values bitwise the same). It runs off Hopper by default, for f32 inputs, and in the three-product
# pass's f32 logits (a softcap with smoothing), so on the H200: every GPU case's "three-product f32"
# runs and `flce bench --backward cublas`. ~3 minutes. To run it:
#   cp gpu-bundle/flce /tmp/flce-main    # a bundle of main (scripts/gpu-prepare.sh)
#   git apply docs/parked/cublas-grad-modules.patch && bash scripts/gpu-prepare.sh
#   cp /tmp/flce-main gpu-bundle/flce-main
# then through the device tool, carrying gpu-bundle: OUT=$OUT bash scripts/gpu-cublas-grad-modules.sh
# Prediction: 1.2–1.6× a launch (s28's three-product G: 3 → 8 blocks an SM gave 1.84×; this one
# starts at 5), −0.3 to −0.8 ms of fwd+bwd with the cuBLAS backward at Llama 3 / Gemma 2.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 90 $B/gpu-tests --small "bf16 plain (" "bf16 all (257" "bf16 bias (257" "bf16 smoothing (257" "bf16 softcap (257" \
  "bf16 weights (257" "f16 all (257" "f32 plain (257" "f32 all (257" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (129,200,5003)" \
  "bf16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
M=gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
for bin in flce-main flce; do
  echo "== $bin" >> "$OUT/ncu.txt"
  timeout 40 ncu --clock-control none -k "regex:flce_grad_from_logits" -c 4 --csv --metrics $M $B/$bin bench \
    --shapes llama3 --backward cublas --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
done
grep -E "==|duration|registers" "$OUT/ncu.txt"
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --backward cublas" OUT=$runs timeout 90 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" > "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"; cat "$OUT/variants.md"
grep -H "" $runs/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
