#!/usr/bin/env bash
# s37 call 2: the vocabulary-slice plan's first GPU run — the oracle cases that take it (compact
# logits: every small shape but the odd-D one, bf16/f16, plain / every compact option / softcap /
# reduction none; each also runs every family and the three-product pass), Llama 3 and Gemma 2
# sampled against f64 (the slice within 1 GB), then its time at 512 MB and 1 GB against the
# default plan (flce bench: fb = the default's forward + backward, step = the trading plan).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
timeout 170 $B/gpu-tests --small "nosoftcap" "plain (" "bf16 softcap (" "bf16 none (" > "$OUT/tests-slice.log" 2>&1
echo "slice cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-slice.log") ok, $(grep -c FAIL "$OUT/tests-slice.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-slice.log" | head -5
timeout 150 $B/gpu-tests "bf16 llama3 sampled fused" "bf16 gemma2 sampled fused" > "$OUT/tests-sampled.log" 2>&1
echo "sampled rc=$? at ${SECONDS}s"; grep -E "\.\.\. |FAIL" "$OUT/tests-sampled.log" | cut -c1-400
for mb in 512 1024; do
  timeout 100 $B/flce bench --shapes gemma2,llama3,qwen25 --iters 5 --step-budget-mb $mb > "$OUT/bench-$mb.log" 2>&1
  echo "bench $mb MB rc=$? at ${SECONDS}s"
done
grep -h "^|" "$OUT"/bench-*.log | cut -d'|' -f2,5,6 | grep -v -- "---"
echo "total ${SECONDS}s"
