#!/usr/bin/env bash
# s31 call 4 (chained after call 3, the same bundle): the backward's G kernel with its epilogue off
# the MMA warpgroups (FLCE_SM90_MAINLOOP=gfold=1, kernels/sm90/grad_staged.cuh; default off).
# GPU cases under gfold=1 (every default-module backward: plain, none, ignore, f16, 2 SMs, pairs,
# partial tiles, N = 1), memcheck / racecheck / synccheck; default vs gfold=1 at Gemma 2, Llama 3,
# Qwen 2.5 (fwd+bwd) and the 16k loss, 3 rounds; ncu of the G launches both ways at Llama 3.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
G=gfold=1
FLCE_SM90_MAINLOOP=$G timeout 110 $B/gpu-tests --small nosoftcap plain none ignore "2 SMs" f16 > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
for tool in memcheck racecheck synccheck; do
  FLCE_SM90_MAINLOOP=$G timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (1,64,1000)" \
    "bf16 plain (1000,64,2200) rest 18 SMs cluster 2" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\.\.\. " /tmp/$tool.log | tail -n 3
  { echo "== compute-sanitizer --tool $tool"; cat /tmp/$tool.log; } >> "$OUT/sanitizers.log"
done
runs=$(mktemp -d)
V=("new=$B/flce" "gfold=$B/flce:FLCE_SM90_MAINLOOP=$G")
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/model timeout 110 bash scripts/gpu-variants.sh 3 "${V[@]}" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/train timeout 40 bash scripts/gpu-variants.sh 3 "${V[@]}" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
M=gpu__time_duration.sum,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for m in gfold=0 $G; do
  echo "== FLCE_SM90_MAINLOOP=$m" >> "$OUT/ncu.txt"
  FLCE_SM90_MAINLOOP=$m timeout 40 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 4 --csv --metrics $M \
    $B/flce bench --shapes llama3 --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f1,5,13- >> "$OUT/ncu.txt"
  echo "ncu $m at ${SECONDS}s"
done
grep -E "==|duration" "$OUT/ncu.txt" | cut -c1-120
cat "$OUT/variants.md"
