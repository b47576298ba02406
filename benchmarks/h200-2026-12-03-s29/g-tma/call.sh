#!/usr/bin/env bash
# s29 call 6: flce_sm90_grad's G through TMA stores (as the compact forward's q since e18b29d), L2
# evict-normal (the products read G next) and evict-first (flce-gef). gpu-bundle = working tree
# on e18b29d; flce-main = e18b29d. GPU cases of the default (sm90) backward with options,
# memcheck; ncu of G launches at Llama 3; main / new / gef fwd+bwd at Gemma 2 and Llama 3 (plain)
# and Gemma 2 with its softcap, 3 rounds; then issue 11's suite at Llama 3 and its 1k / 4k points.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 75 $B/gpu-tests --small "bf16 plain (" "bf16 softcap (257" "bf16 all (257" "bf16 bias (257" "f16 plain (129" \
  "bf16 smoothing (257" "bf16 nosoftcap (1," "f16 softcap (257" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (129,200,5003)" \
  "bf16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for bin in flce-main flce flce-gef; do
  echo "== $bin" >> "$OUT/ncu.txt"
  timeout 30 ncu --clock-control none -k "regex:flce_sm90_grad" -c 3 --csv --metrics $M \
    $B/$bin bench --shapes llama3 --iters 1 --step-budget-mb 0 2> /dev/null | grep '^"' | cut -d, -f5,13- >> "$OUT/ncu.txt"
done
grep -E "==|duration|dram__bytes_read" "$OUT/ncu.txt"
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/plain timeout 110 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" "gef=$B/flce-gef" > "$OUT/variants.md" 2>&1
SHAPES=gemma2 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options softcap" OUT=$runs/softcap timeout 70 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "new=$B/flce" "gef=$B/flce-gef" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"; cat "$OUT/variants.md"
for o in plain softcap; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl
export PYTHONPATH=/tmp/site
left=$((560 - SECONDS))
timeout $left python3 benchmarks/suite.py --flce-bin $B/flce --out /tmp/suite --shapes llama3 --data peaky \
  --extra-dtypes "" --methods flce,flce_fast,cublas,compile,liger --budgets none --rep-ms 600 --sweep 1024,4096 \
  --sweep-methods flce,flce_fast,cublas,compile,liger --max-minutes 3.8 > "$OUT/suite.log" 2>&1
echo "suite rc=$? at ${SECONDS}s"; grep -av "%|" "$OUT/suite.log" | tail -n 18
cp /tmp/suite/results.json "$OUT/results.json" 2>/dev/null
