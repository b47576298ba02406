#!/usr/bin/env bash
# s38: the slice's rest with larger backward chunks (FLCE_SLICE_REST_CHUNK rows; the G bytes come
# out of the head) at 1 GB — does a larger rest chunk pay more than the head rows it costs?
# scripts/gpu-variants.sh, two rounds, its three-product column the slice pass.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5 --step-budget-mb 1024" OUT=$OUT/var \
  bash scripts/gpu-variants.sh 2 "default=$B/flce:FLCE_X=0" "rest12k=$B/flce:FLCE_SLICE_REST_CHUNK=12288" \
  "rest16k=$B/flce:FLCE_SLICE_REST_CHUNK=16384" "rest24k=$B/flce:FLCE_SLICE_REST_CHUNK=24576" > "$OUT/variants.md" 2>&1
tail -n 14 "$OUT/variants.md"
tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
echo "total ${SECONDS}s"
