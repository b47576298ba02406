#!/usr/bin/env bash
# s29 call 5: the compact forward's TMA q stores as L2 evict-first (call 4's ncu: the compact
# forward read 12.5–14.2 GB from DRAM at the 16k loss shape against the plain forward's 6.0 — q's
# 4.2 GB of writes evicting E and C), and with three boxes a warp instead of two.
# gpu-bundle: flce / gpu-tests / wheel = working tree on 653c7a4 (evict-first, 2 boxes);
# flce-hint3 = the same with SM90_Q_STAGES 3; flce-tma = 653c7a4; flce-main = 8472bce.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 60 $B/gpu-tests --small "bf16 plain (" "bf16 nosoftcap (" "f16 plain (129" "bf16 bias (257" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (129,200,5003)" \
  "bf16 nosoftcap (1,64,1000)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for bin in flce-main flce-tma flce flce-hint3; do
  echo "== $bin" >> "$OUT/ncu.txt"
  timeout 40 ncu --clock-control none -k "regex:flce_sm90_forward_compact" -c 2 --csv --metrics $M \
    $B/$bin bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 6144 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
done
grep -E "==|duration|dram__bytes_read|hit_rate" "$OUT/ncu.txt"
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs/model timeout 200 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "tma=$B/flce-tma" "hint=$B/flce" "hint3=$B/flce-hint3" > "$OUT/variants.md" 2>&1
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs/train timeout 100 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "tma=$B/flce-tma" "hint=$B/flce" "hint3=$B/flce-hint3" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
for o in model train; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site timeout 100 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"; grep -A4 "^| tokens" "$OUT/train.log"
cat "$OUT/variants.md"
