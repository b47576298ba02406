#!/usr/bin/env bash
# s32 call 1: the forward finish in a block per 256 tokens (flce_forward_finish + flce_finish_scalars)
# — gpu-bundle = the change on 910a2d4; flce-main = 910a2d4. GPU cases (multi-block finishes, class
# weights with smoothing, N = 1, bad targets / weights, the three-product step), sanitizers; ncu of
# the finish kernels old / new at Llama 3 and the 16k loss; variants main / new / new with
# FLCE_SM90_L2_MB=36 (the Qwen tie-break experiment, perf-notes v40) at the model shapes and the 16k
# loss, 3 rounds; ncu of the Qwen forward at 32 / 36 MB beside cuBLAS; profile of Llama 3 per kernel.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 150 $B/gpu-tests --small "(255,507,123)" "(257,520,300)" "(1,64,1000)" "(1024,64,8000)" bad-target bad-weights \
  chunked-budget de-chunks "rest 18" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck racecheck synccheck initcheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 weights (257,520,300)" \
    "f32 chunked-budget (700,96,3000)" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\.\.\. " /tmp/$tool.log | tail -n 3
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
M=gpu__time_duration.sum,dram__bytes_read.sum
for bin in flce-main flce; do
  for s in llama3 "16384,2048,128256"; do
    echo "== $bin $s" >> "$OUT/ncu.txt"
    timeout 40 ncu --clock-control none -k "regex:finish" --csv --metrics $M \
      $B/$bin bench --shapes $s --iters 1 --step-budget-mb 2048 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
  done
done
echo "ncu finish at ${SECONDS}s"
runs=$(mktemp -d)
V=("main=$B/flce-main" "new=$B/flce" "l2_36=$B/flce:FLCE_SM90_L2_MB=36")
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 200 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 70 bash scripts/gpu-variants.sh 3 "${V[@]:0:2}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for mb in 32 36; do
  echo "== qwen25 FLCE_SM90_L2_MB=$mb" >> "$OUT/ncu.txt"
  FLCE_SM90_L2_MB=$mb timeout 30 ncu --clock-control none -k "regex:^flce_sm90_forward$" -c 1 --csv --metrics $M \
    $B/flce bench --shapes qwen25 --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
done
echo "== qwen25 cuBLAS" >> "$OUT/ncu.txt"
timeout 30 ncu --clock-control none -k "regex:nvjet|gemm" -c 1 --csv --metrics $M \
  $B/flce bench --shapes qwen25 --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
echo "ncu qwen at ${SECONDS}s"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 90 python3 scripts/profile_kernels.py --shape llama3 --configs "auto/auto/min,auto/auto/fast" \
  --launches > "$OUT/profile.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"
grep -E "==|duration" "$OUT/ncu.txt" | cut -c1-120
cat "$OUT/variants.md" | grep -v "^$" | tail -40
