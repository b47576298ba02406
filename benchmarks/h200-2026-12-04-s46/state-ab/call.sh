#!/usr/bin/env bash
# s46 call 4: (1) the three-product pass of `flce bench`, 3ded06e (old: per-token state in the
# workspace) against 4915ef8 (new: in dC's buffer), interleaved, 3 rounds, at the model shapes and
# Llama 3 at 4k tokens (call 3's suite had fast 1.04× s45's at Llama 3: noise or not?); (2) the
# gpu-tests cases call 3 did not reach (its shards' 230 s cap) and the Llama 3 sampled cases.
set -uo pipefail
cp "$0" "$OUT/call.sh"
B=gpu-bundle
export FLCE_CACHE_DIR=$(mktemp -d)
mkdir -p "$OUT/ab"
OUT="$OUT/ab" SHAPES="gemma2,llama3,qwen25 4096,4096,128256" BENCH_ARGS="--step-budget-mb 8192 --iters 10" \
  timeout 230 bash scripts/gpu-variants.sh 3 "old=$B/old/flce" "new=$B/flce" > "$OUT/ab.txt" 2>&1
mapfile -t rest < scripts/.rest.txt
mkdir -p "$OUT/t"
(timeout 200 $B/gpu-tests "llama3 sampled" > "$OUT/t/sampled.log" 2>&1; echo "sampled rc $?" >> "$OUT/t/sampled.log") &
OUT="$OUT/t" SHARDS=3 LIMIT=200 bash $B/scripts/gpu-tests-sharded.sh "${rest[@]}" > "$OUT/t/summary.txt" 2>&1
wait
cd "$OUT" && tar czf logs.tgz ab t && rm -rf ab t
echo "== summary"; tar xzOf logs.tgz t/summary.txt; tar xzOf logs.tgz t/sampled.log | grep -E "^test|rc" | cut -c1-200
tail -n 14 ab.txt
